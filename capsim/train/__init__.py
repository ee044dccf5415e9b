"""Training shared by both papers: the Trainer, its checkpoints, mesh, faults, metrics and progress."""

from capsim.train.trainer import Trainer

__all__ = ["Trainer"]
