"""Training shared by both papers: the Trainer, its checkpoints, faults, metrics and locks.

Nothing below training imports this package (scoring, encoding, loading a model
and the input pipelines stay free of it), and importing it does not load the
Trainer until ``capsim.train.Trainer`` is asked for.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Trainer"]


def __getattr__(name: str) -> Any:
    if name == "Trainer":
        from capsim.train.trainer import Trainer

        return Trainer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
