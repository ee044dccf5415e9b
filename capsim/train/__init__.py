"""Training shared by both papers: the Trainer, its checkpoints, mesh, faults and writers."""

from capsim.train.trainer import Trainer

__all__ = ["Trainer"]
