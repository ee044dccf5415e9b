"""The shapes world: a deterministic synthetic image-caption corpus that builds in seconds.

It is the library's embedded default data (docs/shapes_world.md): both papers' demos
and the tests train on it, so it needs no download. ``generate_world(config)``
returns scenes, their images and frozen features, five captions per scene and
four evaluation sets, all drawn from ``numpy.random.default_rng(config.seed)``.

**Scenes.** 1-3 object groups, each with a colour (8), shape (6), size (2),
position (5 cells of a 3x3 grid: left, right, top, bottom, center) and count
(1-3 identical objects). No two groups share a cell or a colour+shape. When two
groups share a row or a column, the scene states one relation between them
(left of, right of, above, below). Pixels are drawn by ``shapes_render``.

**Captions** come from a small grammar in two *registers*:

- ``plain``: ordinary English with synonyms ("red"/"crimson", "square"/"box"/
  "block", "two"/"a pair of", "big"/"large"), nine templates ("there are ...",
  "... next to ...", "the picture contains ...", passive "... is shown ...",
  "... can be seen above ...", optional "an image of" prefix);
- ``terse``: a second, complete lexicon with one word per attribute value
  ("scarlet", "tile", "twin", "petite", "westside", "atop") and its own function
  words ("alongside", "photo showing").

Each caption is written in one register (terse with probability 0.2).

**Grounding-only synonyms.** The two registers share *no word*, so no plain
word ever appears in a caption together with a terse word. Every context word of
"red" (at any window size, since contexts never cross captions) is a plain word,
and every context word of "scarlet" is a terse word: the context sets are
disjoint, and a model that learns from text alone (word2vec, a text language
model) has nothing that links the two. Yet "red" and "scarlet" name exactly the
same pixels, because rendering reads only attribute values, never words. An
image-grounded model can therefore learn that they mean the same thing; a
text-only one cannot. ``GROUNDING_ONLY_SYNONYMS`` lists the one-word pairs of
colour, shape and size names; every other terse word (counts, positions,
relations) is grounding-only in the same way. ``synonym_pairs`` measures it.

**Evaluation sets** use test-split scenes only:

- ``graded_pairs``: caption pairs with gold similarity in [0, 5] from
  ``description_similarity`` (what the two captions state), stratified over ten
  bins of the gold range.
- ``synonym_pairs``: a caption against itself with one colour/shape/size name
  swapped for its name in the other register (gold 5), mixed with the same
  caption with that attribute changed to another value (gold by the same rule).
- ``same_diff_pairs``: two captions of one scene (+1) or of two scenes (-1).
- ``candidates``: per test scene, captions with controlled errors and a
  rule-based quality standing in for human judgement (``CANDIDATE_QUALITY``).

docs/shapes_world.md documents every rule with examples. Modules: ``lexicon``,
``scenes``, ``grammar``, ``similarity``, ``edits``, ``eval_sets`` and ``world``.
"""

from capsim.data.shapes_render import ObjectGroup, image_features
from capsim.data.shapes_world.edits import CANDIDATE_QUALITY
from capsim.data.shapes_world.eval_sets import Candidate, SimilarityPair
from capsim.data.shapes_world.lexicon import GROUNDING_ONLY_SYNONYMS
from capsim.data.shapes_world.scenes import Description, Mention, Relation, Scene
from capsim.data.shapes_world.similarity import description_similarity
from capsim.data.shapes_world.world import (
    ShapesWorld,
    ShapesWorldConfig,
    generate_world,
    image_id_of,
    render_scenes,
)

__all__ = [
    "CANDIDATE_QUALITY",
    "GROUNDING_ONLY_SYNONYMS",
    "Candidate",
    "Description",
    "Mention",
    "ObjectGroup",
    "Relation",
    "Scene",
    "ShapesWorld",
    "ShapesWorldConfig",
    "SimilarityPair",
    "description_similarity",
    "generate_world",
    "image_features",
    "image_id_of",
    "render_scenes",
]
