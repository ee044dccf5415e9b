"""pycocoevalcap's ``COCOEvalCap`` with I2CE beside the standard metrics.

    from i2ce_jax.cocoeval import COCOEvalCap   # was: from pycocoevalcap.eval import ...
    python -m i2ce_jax.cocoeval --annotations captions.json --results results.json
    python -m i2ce_jax.cocoeval --annotations A.json --results sysA.json
        --results sysB.json --bootstrap 1000 --seed 0

capsim.metrics.cocoeval's evaluator and command (every option, the bootstrap
included), with the packaged ``base`` model's I2CE passed in as a scorer of the raw
captions: the shared core never imports a paper package, the paper plugs into it.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from capsim.cache import use_compilation_cache
from capsim.metrics import cocoeval
from i2ce_jax.scorer import I2CEScorer


def i2ce_score(gts: dict, res: dict) -> tuple[float, Sequence[float]]:
    """The packaged ``base`` model's I2CE of raw captions (pycocoevalcap's contract)."""
    return I2CEScorer.pretrained().compute_score(gts, res)


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
    return cocoeval.main(argv, scorers=SCORERS)


if __name__ == "__main__":
    use_compilation_cache()  # the I2CE column's batch shapes compile once per machine
    sys.exit(main())
