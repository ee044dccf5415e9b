"""The one record type every caption reader returns."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class CaptionRecord:
    """One caption of one image.

    Attributes:
      image_id: the image's id as a string (COCO numeric ids are stringified,
        Flickr8k ids are file names such as ``1000268201_693b08cb0e.jpg``).
      caption_id: unique id of this caption within its corpus.
      text: the raw caption text, untouched apart from stripping whitespace.
      split: ``train``, ``val``/``dev``, ``test``, ``restval`` or ``unsplit``.
    """

    image_id: str
    caption_id: str
    text: str
    split: str
