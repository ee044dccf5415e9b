"""What an I2CE scoring call takes and gives: pycocoevalcap's ``gts``/``res`` contract,
checked with the id at fault, and the ``Scores`` it returns."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from capsim.errors import CaptionError

DEFAULT_SCORER = 2


@dataclasses.dataclass
class Scores:
    """Everything one scoring call computed, in ``res`` order.

    ``similarities`` [N, R] holds the similarity of each candidate with each of its
    references (NaN past a candidate's last reference, and 0.0 for an empty candidate):
    the cosine with scorer 1, the cosine mixed with the word evidence with scorer 2;
    ``mask`` marks the real references.
    """

    ids: list
    scores: np.ndarray
    similarities: np.ndarray
    mask: np.ndarray
    empty_candidates: list
    # "whole" or "sentences" per candidate; for the latter ``similarities`` holds each
    # reference's F, and ``precision``/``recall`` [N, R] its parts (NaN elsewhere).
    ways: list[str] = dataclasses.field(default_factory=list)
    precision: np.ndarray | None = None
    recall: np.ndarray | None = None
    scorer: int = DEFAULT_SCORER  # the scorer version that computed them

    @property
    def corpus_score(self) -> float:
        return float(np.mean(self.scores))


def _is_list_of_captions(value: object) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def validate_gts_res(gts: Mapping, res: Mapping) -> None:
    """Checks pycocoevalcap's contract, naming the id at fault."""
    if not res:
        raise ValueError("res is empty: nothing to score")
    for key, candidates in res.items():
        if key not in gts:
            raise CaptionError(key, "candidate id has no references in gts")
        if not _is_list_of_captions(candidates) or len(candidates) != 1:
            raise CaptionError(key, "res must map each id to a list holding exactly one caption")
        if not isinstance(candidates[0], str | bytes):
            raise CaptionError(key, f"caption must be a string, got {type(candidates[0]).__name__}")
        refs = gts[key]
        if not _is_list_of_captions(refs) or len(refs) == 0:
            raise CaptionError(key, "gts must map each id to a non-empty list of reference strings")
        for j, ref in enumerate(refs):
            if not isinstance(ref, str | bytes):
                raise CaptionError(
                    f"{key}/ref{j}", f"reference must be a string, got {type(ref).__name__}"
                )
