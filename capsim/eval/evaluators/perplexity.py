"""Per-token perplexity of a split's captions, for models that are language models."""

from __future__ import annotations

from typing import Any

from capsim.eval.evaluators.base import Subject


class Perplexity:
    def __init__(self, split: str = "dev"):
        self.split = split

    def __call__(self, subject: Subject) -> dict[str, Any] | None:
        if subject.perplexity is None:
            return None  # not a language model
        return {"perplexity": subject.perplexity(subject.split(self.split))}
