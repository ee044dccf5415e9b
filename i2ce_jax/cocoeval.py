"""pycocoevalcap's ``COCOEvalCap`` with I2CE beside the standard metrics.

    from i2ce_jax.cocoeval import COCOEvalCap   # was: from pycocoevalcap.eval import ...
    python -m i2ce_jax.cocoeval --annotations captions.json --results results.json
    python -m i2ce_jax.cocoeval --annotations A.json --results sysA.json
        --results sysB.json --bootstrap 1000 --seed 0
    python -m i2ce_jax.cocoeval --sentences whole --annotations A.json --results R.json
    python -m i2ce_jax.cocoeval --scorer 1 --annotations A.json --results R.json

capsim.metrics.cocoeval's evaluator and command (every option, the bootstrap
included), with the packaged ``base`` model's I2CE passed in as a scorer of the raw
captions: the shared core never imports a paper package, the paper plugs into it.
The I2CE column takes the scorer's default path: a caption of several sentences is
aligned sentence by sentence (docs/long_captions.md). ``--sentences whole|sentences``
(before capsim's own arguments are read) or ``scorers={"I2CE": i2ce_scorer("whole")}``
forces a way. ``--scorer 1`` (or ``i2ce_scorer(scorer=1)``) is the I2CE scorer before
word-level evidence, bit for bit (i2ce_jax.scorer).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from capsim.cache import use_compilation_cache
from capsim.metrics import cocoeval
from i2ce_jax.scorer import AUTO, DEFAULT_SCORER, SENTENCE_MODES, WORD_EVIDENCE, I2CEScorer


def i2ce_score(gts: dict, res: dict) -> tuple[float, Sequence[float]]:
    """The packaged ``base`` model's I2CE of raw captions (pycocoevalcap's contract)."""
    return I2CEScorer.pretrained().compute_score(gts, res)


def i2ce_scorer(sentences: str = AUTO, scorer: int = DEFAULT_SCORER) -> cocoeval.RawScorer:
    """The packaged ``base`` model's I2CE with ``sentences`` (``"auto"``, ``"whole"`` or
    ``"sentences"``, as ``I2CEScorer``'s) and the ``scorer`` version, for COCOEvalCap's
    ``scorers``.

    Raises:
      ValueError: for an unknown mode or version.
    """
    if sentences not in SENTENCE_MODES:
        raise ValueError(f"unknown sentences mode {sentences!r}; use one of {SENTENCE_MODES}")
    if scorer not in WORD_EVIDENCE:
        raise ValueError(f"unknown scorer {scorer!r}; use one of {sorted(WORD_EVIDENCE)}")
    if sentences == AUTO and scorer == DEFAULT_SCORER:
        return i2ce_score

    def score(gts: dict, res: dict) -> tuple[float, Sequence[float]]:
        return I2CEScorer.pretrained(sentences=sentences, scorer=scorer).compute_score(gts, res)

    return score


SCORERS: dict[str, cocoeval.RawScorer] = {"I2CE": i2ce_score}


class COCOEvalCap(cocoeval.COCOEvalCap):
    """capsim.metrics.cocoeval.COCOEvalCap with the I2CE column (and any other ``scorers``)."""

    def __init__(
        self,
        coco: Any,
        cocoRes: Any,
        scorers: Mapping[str, cocoeval.RawScorer] | None = None,
        cider_idf: str | Path | cocoeval.CorpusIdf | None = None,
    ):
        super().__init__(coco, cocoRes, {**SCORERS, **(scorers or {})}, cider_idf)


def main(argv: Sequence[str] | None = None) -> int:
    """capsim.metrics.cocoeval's command with the I2CE column; ``--sentences`` chooses its
    way (default auto), ``--scorer`` its version (default 2)."""
    first = argparse.ArgumentParser(add_help=False)
    first.add_argument("--sentences", default=AUTO, choices=SENTENCE_MODES)
    first.add_argument("--scorer", type=int, default=DEFAULT_SCORER, choices=sorted(WORD_EVIDENCE))
    known, rest = first.parse_known_args(sys.argv[1:] if argv is None else list(argv))
    return cocoeval.main(rest, scorers={"I2CE": i2ce_scorer(known.sentences, known.scorer)})


if __name__ == "__main__":
    use_compilation_cache()  # the I2CE column's batch shapes compile once per machine
    sys.exit(main())
