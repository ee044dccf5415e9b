"""Error types for bad input.

Every error names where the bad input lives (a file and line, or an id) so a
user can fix the data without a debugger. See docs/architecture.md (Conventions).
"""

from __future__ import annotations


class CapsimError(ValueError):
    """Base class for bad-input errors raised by the library."""


class DataFormatError(CapsimError):
    """A data file does not follow its documented format."""

    def __init__(self, path: object, message: str, line: int | None = None):
        self.path = str(path)
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class CaptionError(CapsimError):
    """A caption cannot be encoded (empty, all out-of-vocabulary, too long, bad bytes)."""

    def __init__(self, caption_id: object, message: str):
        self.caption_id = caption_id
        super().__init__(f"caption {caption_id!r}: {message}")


class FeatureError(CapsimError):
    """An image feature is missing, non-finite or of the wrong dimension."""

    def __init__(self, image_id: object, message: str):
        self.image_id = image_id
        super().__init__(f"image {image_id!r}: {message}")


class CheckpointError(CapsimError):
    """A checkpoint directory is missing, empty or unreadable."""


class UnusableCheckpointsError(CheckpointError):
    """A workdir held checkpoints and none reads back: resuming is impossible, and starting
    again from step 0 over the old run's logs needs the trainer's explicit ``start_over``."""
