"""Evaluators named in the config, shared by both papers.

A config lists them as ``config.evals = {name: dict(type=..., every=..., **kwargs)}``:
``type`` picks a class from ``EVALUATORS``, the other keys are its arguments.
Entries with ``every > 0`` run during training every that many steps (their
numbers are logged as ``name/key``; early stopping watches one of them, e.g.
``dev/same_image_auc``); entries with ``every == 0`` make the final report,
``results[name]``. Each evaluator gets a ``Subject``: the model as functions
(``embed``, ``compute_score``, ``embed_images``) and the run's data. An
evaluator that reads nothing but ``subject.embed`` says so with a class
attribute ``text_only = True``, so a caller can skip loading the run's data.

Adding an evaluator is one file in this package and one line in ``EVALUATORS``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from capsim.eval.evaluators import judgments, perplexity, retrieval, same_diff, shapes, sts
from capsim.eval.evaluators.base import Evaluator, Subject

EVALUATORS: dict[str, Callable[..., Evaluator]] = {
    "same_image": same_diff.SameImage,
    "same_diff": same_diff.SameDiff,
    "retrieval": retrieval.Retrieval,
    "sts": sts.Sts,
    "sick": sts.SickR,
    "stsb": sts.StsBenchmark,
    "shapes": shapes.ShapesWorldPairs,
    "judgments": judgments.Judgments,
    "perplexity": perplexity.Perplexity,
}
RESERVED_KEYS = ("type", "every")

__all__ = ["EVALUATORS", "Evaluators", "Subject"]


class Evaluators:
    """The evaluators of ``config.evals``, built once.

    ``subject_of(model)`` makes the Subject of a model during training; the
    final ``report`` takes a Subject directly (baselines that never train have one too).
    """

    def __init__(
        self,
        evals: Mapping[str, Mapping[str, Any]],
        subject_of: Callable[[Any], Subject] | None = None,
    ):
        self.subject_of = subject_of
        self.entries: dict[str, tuple[Evaluator, int]] = {}
        for name, entry in evals.items():
            entry = dict(entry)
            kind = entry.get("type")
            if kind not in EVALUATORS:
                raise KeyError(f"evals.{name}: unknown type {kind!r}; known: {sorted(EVALUATORS)}")
            every = int(entry.get("every", 0))
            kwargs = {k: v for k, v in entry.items() if k not in RESERVED_KEYS}
            try:
                self.entries[name] = (EVALUATORS[kind](**kwargs), every)
            except TypeError as error:
                raise KeyError(f"evals.{name} ({kind}): {error}") from error

    @property
    def every(self) -> int:
        """Steps between training-time evaluations (0: none run during training)."""
        periods = [every for _, every in self.entries.values() if every > 0]
        return math.gcd(*periods) if periods else 0

    def during_training(self, model: Any, step: int, last: bool) -> dict[str, float]:
        """``name/key`` numbers of the entries due at ``step`` (all of them at the last step)."""
        due = {
            n: e for n, (e, every) in self.entries.items() if every and (last or step % every == 0)
        }
        if not due:
            return {}
        subject = self.subject_of(model)
        results = {}
        for name, evaluator in due.items():
            for key, value in (evaluator(subject) or {}).items():
                if isinstance(value, int | float):  # scalars only: the loop logs and compares them
                    results[f"{name}/{key}"] = value
        return results

    def text_only(self, names: Sequence[str] | None = None) -> bool:
        """Whether the final-report entries (or ``names``) need nothing but ``subject.embed``."""
        return all(getattr(self.entries[n][0], "text_only", False) for n in self._chosen(names))

    def _chosen(self, names: Sequence[str] | None) -> list[str]:
        chosen = (
            list(names) if names is not None else [n for n, (_, e) in self.entries.items() if not e]
        )
        unknown = [n for n in chosen if n not in self.entries]
        if unknown:
            raise KeyError(f"unknown evaluations {unknown}; this config has {sorted(self.entries)}")
        return chosen

    def report(self, subject: Subject, names: Sequence[str] | None = None) -> dict[str, Any]:
        """``{name: result}`` of the final-report entries (or of ``names``, any of them)."""
        return {name: self.entries[name][0](subject) for name in self._chosen(names)}
