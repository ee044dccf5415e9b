"""CIDEr's document frequencies from a chosen reference corpus, as the original CIDEr code
offered (its ``coco-val-df``), instead of from the references being scored.

pycocoevalcap counts an n-gram's document frequency over the references of the ids it
scores, so a handful of images gets a meaningless IDF: on one image every n-gram of the
references has df = 1 = the image count, its IDF is log(1) - log(1) = 0 and CIDEr is 0
(coco-caption #9 and #10, pycocoevalcap #18). With a corpus, an n-gram's df is the
number of the corpus's images whose references contain it, and the reference length is
log of the corpus's image count. The corpus is a COCO-format annotations file
(``{"annotations": [{"image_id", "caption"}, ...]}``) or a JSON object of image id ->
references; its captions are PTB-tokenised as pycocoevalcap tokenises references. The
frequencies are cached under the capsim cache directory by the file's SHA-256.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections import Counter
from pathlib import Path

import numpy as np

from capsim.cache import cache_dir
from capsim.data.captions import read_json_file, read_references_json
from capsim.errors import DataFormatError
from capsim.metrics.ngram_counts import DEFAULT_MAX_ORDER, NgramCounts
from capsim.metrics.tokenizer import ptb_tokenize

CACHE_VERSION = 1  # bump when the tokenisation or the counting changes


@dataclasses.dataclass(frozen=True)
class CorpusIdf:
    """n-gram (words joined by spaces) -> the corpus images whose references hold it."""

    document_frequency: dict[str, int]
    images: int

    def frequencies(self, ngrams: NgramCounts) -> np.ndarray:
        """The document frequency of each column of ``ngrams`` (0 for n-grams the corpus
        never has)."""
        get = self.document_frequency.get
        return np.fromiter((get(key, 0) for key in ngrams.column_keys()), np.float64)


def _corpus_references(path: Path) -> dict[str, list[str]]:
    data = read_json_file(path)
    if not (isinstance(data, dict) and isinstance(data.get("annotations"), list)):
        return read_references_json(path)
    references: dict[str, list[str]] = {}
    for index, entry in enumerate(data["annotations"]):
        if not (isinstance(entry, dict) and "image_id" in entry):
            raise DataFormatError(path, f"annotation {index} lacks image_id/caption")
        caption = entry.get("caption")
        if not isinstance(caption, str) or not caption.strip():
            raise DataFormatError(path, f"annotation {index}: caption must be a non-empty string")
        references.setdefault(str(entry["image_id"]), []).append(caption)
    if not references:
        raise DataFormatError(path, "no annotations")
    return references


def count_document_frequency(
    references: dict[str, list[str]], max_order: int = DEFAULT_MAX_ORDER
) -> CorpusIdf:
    """Document frequencies of already tokenised ``image -> references``."""
    frequency: Counter[str] = Counter()
    for captions in references.values():
        held = set()
        for caption in captions:
            tokens = caption.split()
            for n in range(1, max_order + 1):
                held.update(" ".join(tokens[s : s + n]) for s in range(len(tokens) - n + 1))
        frequency.update(held)
    return CorpusIdf(dict(frequency), len(references))


def corpus_idf(path: str | Path) -> CorpusIdf:
    """The document frequencies of the corpus file at ``path``, from the cache when this
    file (by content) was counted before."""
    path = Path(path)
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError as error:
        raise DataFormatError(path, "file does not exist") from error
    cached = cache_dir() / "cider-idf" / f"v{CACHE_VERSION}-{digest}.json"
    if cached.exists():
        data = json.loads(cached.read_text(encoding="utf-8"))
        return CorpusIdf(data["document_frequency"], data["images"])
    idf = count_document_frequency(ptb_tokenize(_corpus_references(path)))
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(cached.name + f".{os.getpid()}.tmp")
        payload = {"images": idf.images, "document_frequency": idf.document_frequency}
        partial.write_text(json.dumps(payload), encoding="utf-8")
        os.replace(partial, cached)
    except OSError:
        pass  # a read-only cache only costs the next run the counting
    return idf
