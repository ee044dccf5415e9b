"""Generated long-caption pairs for developing a metric on paragraphs (issue 60).

    python -m capsim.eval.long_caption_pairs --data_dir ../shared/data --out long_pairs.jsonl
        [--seed 0] [--data_seed 0] [--min_images 4] [--max_images 16]

Judged by ``python -m capsim.metaeval --judgments pairs:long_pairs.jsonl`` (or
``i2ce_jax.evaluate``). No published long-caption judgment set is used: the pairs are
built from held-out captions the project already reads, by rule, with a seed.

**Images.** Only the held-out dev images of the packaged I2CE models: the 500 COCO
val2017 images of the ``coco`` dev set (``data.dev_images=500``, ``data.seed=0``, the
draw of capsim.data.corpus; ``--data_seed`` for runs trained with another) and
Flickr30k's val split (the ``flickr`` dev set), each with five captions. No model was
trained on them, none is a Flickr8k test image (the Flickr30k reader refuses those) and
none is in the Karpathy COCO test split that THumB judges, so tuning on them leaks
nothing into the judgment sets.

**A document** is a few images of one source (``--min_images`` to ``--max_images``,
drawn per document) treated as the regions of one detailed description. Each image's
five captions are shuffled; the candidate paragraph joins its first caption of each
image, and four reference paragraphs join the second to fifth. So the candidate is never
a copy of a reference: it says the same things in other people's words, as a human
correction of a model's caption does.

**Pairs.** ``better`` is the candidate paragraph, ``worse`` a copy with one corruption
in one sentence, one pair per document and category where the document allows it:

- ``object``: an object noun replaced by one of another COCO category ("dog" -> "kite");
- ``sentence``: a sentence replaced by the candidate caption of an image of another
  document;
- ``count``: a number word changed ("two" -> "five");
- ``colour``: a colour word changed ("red" -> "green").

Each caption ends with a full stop in the paragraphs (one is added where it had none),
so a paragraph splits into its captions.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from capsim.config_lib import DATA_SEED

# An object noun per COCO category (its name, or a common word for it); a swap takes a
# noun of another category.
OBJECTS = {
    "person": ("man", "woman", "boy", "girl", "child", "person", "lady", "guy", "kid"),
    "bicycle": ("bicycle", "bike"),
    "car": ("car",),
    "motorcycle": ("motorcycle",),
    "airplane": ("airplane", "plane", "jet"),
    "bus": ("bus",),
    "train": ("train",),
    "truck": ("truck",),
    "boat": ("boat",),
    "traffic light": ("traffic light",),
    "bench": ("bench",),
    "bird": ("bird",),
    "cat": ("cat", "kitten"),
    "dog": ("dog", "puppy"),
    "horse": ("horse",),
    "sheep": ("sheep",),
    "cow": ("cow",),
    "elephant": ("elephant",),
    "bear": ("bear",),
    "zebra": ("zebra",),
    "giraffe": ("giraffe",),
    "umbrella": ("umbrella",),
    "suitcase": ("suitcase",),
    "frisbee": ("frisbee",),
    "skis": ("skis",),
    "snowboard": ("snowboard",),
    "kite": ("kite",),
    "skateboard": ("skateboard",),
    "surfboard": ("surfboard",),
    "bottle": ("bottle",),
    "cup": ("cup",),
    "bowl": ("bowl",),
    "banana": ("banana",),
    "sandwich": ("sandwich",),
    "pizza": ("pizza",),
    "cake": ("cake",),
    "chair": ("chair",),
    "couch": ("couch", "sofa"),
    "bed": ("bed",),
    "dining table": ("table",),
    "toilet": ("toilet",),
    "tv": ("television", "tv"),
    "laptop": ("laptop",),
    "cell phone": ("phone",),
    "clock": ("clock",),
    "book": ("book",),
    "vase": ("vase",),
    "teddy bear": ("teddy bear",),
    "ball": ("ball",),
}
NUMBERS = ("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
COLOURS = ("red", "blue", "green", "yellow", "black", "white", "brown", "pink", "purple", "gray")
COLOUR_SPELLINGS = {"grey": "gray"}
CATEGORIES = ("object", "sentence", "count", "colour")
REFERENCES = 4
CAPTIONS_PER_IMAGE = REFERENCES + 1


def _word_pattern(words: Sequence[str]) -> re.Pattern:
    alternatives = sorted(words, key=len, reverse=True)
    return re.compile(r"\b(" + "|".join(map(re.escape, alternatives)) + r")\b", re.IGNORECASE)


_CATEGORY_OF = {word: name for name, words in OBJECTS.items() for word in words}
_OBJECT_RE = _word_pattern(list(_CATEGORY_OF))
_NUMBER_RE = _word_pattern(NUMBERS)
_COLOUR_RE = _word_pattern([*COLOURS, *COLOUR_SPELLINGS])


def sentence_of(caption: str) -> str:
    """A caption as one sentence of a paragraph: spaces collapsed, a full stop at its end."""
    caption = " ".join(caption.split())
    return caption if caption[-1:] in ".!?" else f"{caption}."


def paragraph(captions: Sequence[str]) -> str:
    """Captions joined into one paragraph, each closed by a full stop (``sentence_of``)."""
    return " ".join(sentence_of(c) for c in captions)


def _cased(replacement: str, original: str) -> str:
    return replacement[:1].upper() + replacement[1:] if original[:1].isupper() else replacement


def _replace_one(
    sentence: str, pattern: re.Pattern, choose, rng: np.random.Generator
) -> str | None:
    """``sentence`` with one random match of ``pattern`` replaced by ``choose(match)``."""
    matches = list(pattern.finditer(sentence))
    if not matches:
        return None
    match = matches[rng.integers(len(matches))]
    new = _cased(choose(match[0].lower()), match[0])
    return sentence[: match.start()] + new + sentence[match.end() :]


def _swap_from(options: Sequence[str], same, rng: np.random.Generator):
    def choose(word: str) -> str:
        others = [o for o in options if not same(o, word)]
        return others[rng.integers(len(others))]

    return choose


def corrupt(
    sentences: list[str], category: str, rng: np.random.Generator, foreign: str
) -> list[str] | None:
    """``sentences`` with one of them corrupted by ``category``, or None when none can be.

    Args:
      sentences: the candidate paragraph's sentences.
      category: one of CATEGORIES.
      rng: the generator's random state.
      foreign: a sentence of another document (for ``"sentence"``).

    Returns:
      The corrupted copy, or None when no sentence has a word of the category.
    """
    if category == "sentence":
        slot = int(rng.integers(len(sentences)))
        return [*sentences[:slot], sentence_of(foreign), *sentences[slot + 1 :]]
    pattern, choose = {
        "object": (
            _OBJECT_RE,
            _swap_from(list(_CATEGORY_OF), lambda o, w: _CATEGORY_OF[o] == _CATEGORY_OF[w], rng),
        ),
        "count": (_NUMBER_RE, _swap_from(NUMBERS, lambda o, w: o == w, rng)),
        "colour": (
            _COLOUR_RE,
            _swap_from(COLOURS, lambda o, w: o == COLOUR_SPELLINGS.get(w, w), rng),
        ),
    }[category]
    slots = [k for k, s in enumerate(sentences) if pattern.search(s)]
    if not slots:
        return None
    slot = slots[int(rng.integers(len(slots)))]
    changed = _replace_one(sentences[slot], pattern, choose, rng)
    return [*sentences[:slot], changed, *sentences[slot + 1 :]]


def dev_images(data_dir: str | Path, data_seed: int = DATA_SEED) -> dict[str, list[list[str]]]:
    """Per source, the captions (five each) of every held-out dev image, in image order.

    ``data_seed`` is the runs' ``config.data.seed`` (the draw of their held-out images,
    the same for every training seed); the default is the packaged models'.
    """
    from capsim.data import sources
    from capsim.data.corpus import hold_out_images

    # The packaged models' dev draw (i2ce_jax/pretrained/*/encoder.json: dev_images 500,
    # data.seed 0, dev_sets coco and flickr).
    coco, _ = sources.dev_records("coco", data_dir)
    drawn = {
        "coco": hold_out_images(coco, 500, data_seed)[1],
        "flickr30k": sources.dev_records("flickr", data_dir)[0],
    }
    out = {}
    for name, records in drawn.items():
        by_image: dict[str, list[str]] = {}
        for record in records:
            by_image.setdefault(record.image_id, []).append(record.text)
        out[name] = [
            by_image[i] for i in sorted(by_image) if len(by_image[i]) >= CAPTIONS_PER_IMAGE
        ]
    return out


def generate(
    images: dict[str, list[list[str]]],
    seed: int = 0,
    min_images: int = 4,
    max_images: int = 16,
) -> list[dict]:
    """The pair rows (``pairs:`` JSON objects) of documents drawn from ``images``.

    Args:
      images: per source, each image's captions (at least five).
      seed: the draw's seed; the same seed and images give the same rows.
      min_images: fewest images in a document.
      max_images: most images in a document.

    Returns:
      Rows with ``id``, ``image`` (the document, the bootstrap's unit), ``category``,
      ``source``, ``references`` (four paragraphs), ``better`` and ``worse``.

    Raises:
      ValueError: for an image with fewer than five captions or bad sizes.
    """
    if not 1 <= min_images <= max_images:
        raise ValueError(f"need 1 <= min_images <= max_images, got {min_images}, {max_images}")
    rng = np.random.default_rng(seed)
    rows = []
    for source in sorted(images):
        captions = images[source]
        for k, caps in enumerate(captions):
            if len(caps) < CAPTIONS_PER_IMAGE:
                raise ValueError(f"{source} image {k} has {len(caps)} captions, needs 5")
        order = rng.permutation(len(captions))
        documents, at = [], 0
        while at + min_images <= len(order):
            size = int(rng.integers(min_images, max_images + 1))
            documents.append(order[at : at + size])
            at += size
        shuffled = {int(i): rng.permutation(captions[i])[:CAPTIONS_PER_IMAGE] for i in order}
        for d, members in enumerate(documents):
            candidate = [sentence_of(shuffled[int(i)][0]) for i in members]
            references = [
                paragraph([shuffled[int(i)][r + 1] for i in members]) for r in range(REFERENCES)
            ]
            outside = [int(i) for i in order if int(i) not in set(members.tolist())]
            for category in CATEGORIES:
                foreign = shuffled[outside[int(rng.integers(len(outside)))]][0]
                worse = corrupt(candidate, category, rng, foreign)
                if worse is None:
                    continue
                rows.append(
                    {
                        "id": f"{source}-{d}-{category}",
                        "image": f"{source} document {d}",
                        "category": category,
                        "source": source,
                        "references": references,
                        "better": " ".join(candidate),
                        "worse": " ".join(worse),
                    }
                )
    return rows


def write_pairs(rows: Sequence[dict], path: str | Path) -> None:
    """Writes ``rows`` as JSON lines, replacing ``path`` atomically."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    partial.write_text("".join(json.dumps(row) + "\n" for row in rows))
    os.replace(partial, path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", required=True, help="the ../shared/data layout")
    parser.add_argument("--out", required=True, help="the pairs file to write (JSON lines)")
    parser.add_argument("--seed", type=int, default=0, help="the pairs' draw")
    parser.add_argument(
        "--data_seed", type=int, default=DATA_SEED, help="the runs' config.data.seed"
    )
    parser.add_argument("--min_images", type=int, default=4)
    parser.add_argument("--max_images", type=int, default=16)
    args = parser.parse_args(argv)
    images = dev_images(args.data_dir, args.data_seed)
    rows = generate(images, args.seed, args.min_images, args.max_images)
    write_pairs(rows, args.out)
    words = [len(r["better"].split()) for r in rows]
    counts = {c: sum(r["category"] == c for r in rows) for c in CATEGORIES}
    print(
        f"{len(rows)} pairs {counts}, candidates of {min(words)}-{max(words)} words "
        f"(mean {np.mean(words):.0f}) -> {args.out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
