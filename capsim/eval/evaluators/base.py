"""What an evaluator sees: the model under test, as functions, and the run's data."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from capsim.data.corpus import CaptionSplit

Embed = Callable[[Sequence[str]], np.ndarray]
# pycocoevalcap's contract: compute_score(gts, res) -> (corpus score, per-caption scores).
ComputeScore = Callable[[Mapping[str, list[str]], Mapping[str, list[str]]], tuple]


@dataclasses.dataclass
class Subject:
    """The model under test and the data of its run; each evaluator reads what it needs.

    ``embed``: sentences -> vectors (compared by cosine). ``compute_score``: a
    caption scorer. ``embed_images``: image features -> vectors in the text
    space. ``perplexity``: a caption split -> per-token perplexity, for language
    models. ``splits``: held-out caption splits by name ("dev", "test").
    ``world``: the shapes world, when the run trains on it.
    """

    embed: Embed | None = None
    compute_score: ComputeScore | None = None
    embed_images: Callable[[np.ndarray], np.ndarray] | None = None
    perplexity: Callable[[CaptionSplit], float] | None = None
    splits: Mapping[str, CaptionSplit] = dataclasses.field(default_factory=dict)
    world: Any = None

    def split(self, name: str) -> CaptionSplit:
        if name not in self.splits:
            raise KeyError(f"this run has no {name!r} split; it has {sorted(self.splits)}")
        return self.splits[name]


class Evaluator(Protocol):
    """Built from its config entry's keyword arguments; returns numbers, or None when
    it does not apply to this run (say, no STS files or no image tower)."""

    def __call__(self, subject: Subject) -> dict[str, Any] | None: ...
