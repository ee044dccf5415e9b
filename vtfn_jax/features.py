"""Frozen image features for VTFN: storage and caption alignment (PCA: vtfn_jax.pca;
COCO object labels: vtfn_jax.coco_labels).

A user's features arrive as ``features.npy`` ([N, D] float) plus the image ids in
row order (``ids.json`` list or ``ids.txt``, one per line), as written by
``vtfn_jax.extract_features``, or as ``features.array_record`` (one float32 record
per image, the format TFDS and grain share) with the same ids. Everything is
validated at load time so a NaN or a wrong dimension fails with the image id or
file, not as a NaN loss hours later.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import grain
import numpy as np
from array_record.python.array_record_module import ArrayRecordWriter

from capsim.data.records import CaptionRecord
from capsim.errors import DataFormatError, FeatureError

logger = logging.getLogger(__name__)

FEATURES_FILE = "features.npy"
ARRAY_RECORD_FILE = "features.array_record"
LAYOUTS = ("npy", "array_record")
READ_CHUNK = 4096  # rows per read when a whole ArrayRecord store is loaded
IDS_FILE = "ids.json"
META_FILE = "meta.json"
EXAMPLE_IDS_SHOWN = 5


class FeatureStore:
    """An immutable [N, D] float32 feature matrix keyed by image id (ids are strings)."""

    def __init__(
        self,
        ids: Sequence[object],
        matrix: np.ndarray,
        source: str,
        expected_dim: int | None = None,
    ):
        matrix = np.asarray(matrix)
        if matrix.ndim != 2:
            raise DataFormatError(
                source, f"features must be a 2-D [images, dim] array, got shape {matrix.shape}"
            )
        ids = [str(image_id) for image_id in ids]
        if len(ids) != matrix.shape[0]:
            raise DataFormatError(
                source, f"{matrix.shape[0]} feature rows but {len(ids)} image ids"
            )
        if expected_dim is not None and matrix.shape[1] != expected_dim and ids:
            raise FeatureError(
                ids[0],
                f"{source} has feature dim {matrix.shape[1]} (all rows), expected {expected_dim}",
            )
        self._row_of: dict[str, int] = {}
        for row, image_id in enumerate(ids):
            if image_id in self._row_of:
                raise FeatureError(
                    image_id,
                    f"appears twice in the ids of {source} (rows {self._row_of[image_id]} and {row})",
                )
            self._row_of[image_id] = row
        matrix = matrix.astype(np.float32)
        bad_rows = np.flatnonzero(~np.all(np.isfinite(matrix), axis=1))
        if bad_rows.size:
            row = int(bad_rows[0])
            raise FeatureError(
                ids[row],
                f"non-finite feature values in {source} row {row} ({bad_rows.size} bad rows in all)",
            )
        matrix.setflags(write=False)
        self._ids = tuple(ids)
        self._matrix = matrix
        self.source = source

    @classmethod
    def from_arrays(
        cls,
        ids: Sequence[object],
        matrix: np.ndarray,
        source: str = "in-memory arrays",
        expected_dim: int | None = None,
    ) -> FeatureStore:
        """Wraps features already in memory; ``source`` says where they came from in errors and meta."""
        return cls(ids, matrix, source, expected_dim)

    @classmethod
    def from_npy(
        cls, features_path: str | Path, ids_path: str | Path, expected_dim: int | None = None
    ) -> FeatureStore:
        """Loads ``features.npy`` and its ids (``.json`` list or ``.txt`` one id per line)."""
        features_path = Path(features_path)
        try:
            matrix = np.load(features_path, allow_pickle=False)
        except Exception as error:
            raise DataFormatError(
                features_path, f"cannot read as .npy ({type(error).__name__}: {error})"
            ) from error
        ids = _read_ids(Path(ids_path))
        if matrix.ndim == 2 and len(ids) != matrix.shape[0]:  # either file may be the bad one
            raise DataFormatError(
                features_path,
                f"{matrix.shape[0]} feature rows but {len(ids)} image ids in {ids_path}",
            )
        return cls(ids, matrix, str(features_path), expected_dim)

    @classmethod
    def load(cls, directory: str | Path, expected_dim: int | None = None) -> FeatureStore:
        """Loads either layout written by :meth:`save` (``features.array_record`` if present)."""
        directory = Path(directory)
        records = directory / ARRAY_RECORD_FILE
        if not records.exists():
            return cls.from_npy(directory / FEATURES_FILE, directory / IDS_FILE, expected_dim)
        ids = _read_ids(directory / IDS_FILE)
        reader = ArrayRecordFeatures(records, _stored_dim(directory / META_FILE))
        if len(reader) != len(ids):
            raise DataFormatError(
                records, f"{len(reader)} records but {len(ids)} image ids in {IDS_FILE}"
            )
        matrix = np.empty(reader.shape, np.float32)
        for start in range(0, len(ids), READ_CHUNK):
            rows = np.arange(start, min(start + READ_CHUNK, len(ids)))
            matrix[rows] = reader[rows]
        return cls(ids, matrix, str(records), expected_dim)

    @property
    def ids(self) -> tuple[str, ...]:
        return self._ids

    @property
    def matrix(self) -> np.ndarray:
        """The read-only [N, D] float32 matrix, rows in ``ids`` order."""
        return self._matrix

    @property
    def dim(self) -> int:
        return self._matrix.shape[1]

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, image_id: object) -> bool:
        return str(image_id) in self._row_of

    def rows(self, image_ids: Iterable[object]) -> np.ndarray:
        """Row indices of ``image_ids``; a missing id raises FeatureError naming it."""
        indices = []
        for image_id in image_ids:
            row = self._row_of.get(str(image_id))
            if row is None:
                raise FeatureError(image_id, f"no feature in {self.source}")
            indices.append(row)
        return np.asarray(indices, dtype=np.int64)

    def lookup(self, image_ids: Iterable[object]) -> np.ndarray:
        """The [len(image_ids), D] features of ``image_ids``, in that order."""
        return self._matrix[self.rows(image_ids)]

    def save(self, directory: str | Path, layout: str = "npy") -> Path:
        """Writes the features (``features.npy``, or with ``layout="array_record"``
        ``features.array_record``), ids.json and meta.json (source, count, dim, layout)."""
        if layout not in LAYOUTS:
            raise ValueError(f"unknown feature layout {layout!r}; valid: {list(LAYOUTS)}")
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        if layout == "npy":
            np.save(directory / FEATURES_FILE, self._matrix)
        else:
            writer = ArrayRecordWriter(str(directory / ARRAY_RECORD_FILE), "group_size:1")
            for row in self._matrix:
                writer.write(row.tobytes())
            writer.close()
        (directory / IDS_FILE).write_text(json.dumps(list(self._ids)), encoding="utf-8")
        meta = {"source": self.source, "count": len(self), "dim": self.dim, "layout": layout}
        (directory / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")
        return directory


class ArrayRecordFeatures:
    """Feature rows read on demand from an ArrayRecord file, one float32 record per image.

    ``features[rows]`` gives [len(rows), dim] float32 like a NumPy matrix, so a
    store larger than memory can feed the batch-gathering input pipeline
    directly: each process then reads only its own rows, in grain's reader
    threads or worker processes (grain's ArrayRecordDataSource pickles).
    """

    def __init__(self, path: str | Path, dim: int):
        self.path, self.dim = Path(path), int(dim)
        try:
            self._source = grain.sources.ArrayRecordDataSource([str(self.path)])
            self._count = len(self._source)
        except Exception as error:  # the reader raises several types for a damaged file
            raise DataFormatError(
                self.path, f"cannot read as ArrayRecord ({type(error).__name__}: {error})"
            ) from error

    def __len__(self) -> int:
        return self._count

    @property
    def shape(self) -> tuple[int, int]:
        return (self._count, self.dim)

    def __getitem__(self, rows: np.ndarray) -> np.ndarray:
        rows = np.atleast_1d(np.asarray(rows, np.int64))
        try:
            records = self._source.__getitems__(rows.tolist())
        except Exception as error:
            raise DataFormatError(
                self.path, f"cannot read records ({type(error).__name__}: {error})"
            ) from error
        size = 4 * self.dim
        for row, record in zip(rows, records, strict=True):
            if len(record) != size:
                raise DataFormatError(
                    self.path,
                    f"record {row} has {len(record)} bytes, expected {size} ({self.dim} float32)",
                )
        return np.frombuffer(b"".join(records), np.float32).reshape(len(rows), self.dim)


def _stored_dim(meta_path: Path) -> int:
    try:
        return int(json.loads(meta_path.read_text(encoding="utf-8"))["dim"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise DataFormatError(meta_path, f"needs the feature dim ({error})") from error


def _read_ids(path: Path) -> list[str]:
    if path.suffix == ".json":
        try:
            ids = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise DataFormatError(path, f"cannot read as JSON: {error}") from error
        if not isinstance(ids, list):
            raise DataFormatError(
                path, f"expected a JSON list of image ids, got {type(ids).__name__}"
            )
        for position, image_id in enumerate(ids):
            if isinstance(image_id, bool) or not isinstance(image_id, str | int):
                raise DataFormatError(
                    path, f"entry {position} is {image_id!r}, not a string or integer id"
                )
        return [str(image_id) for image_id in ids]
    if path.suffix == ".txt":
        lines = path.read_text(encoding="utf-8").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        ids = [line.strip() for line in lines]
        for number, image_id in enumerate(ids, start=1):
            if not image_id:
                raise DataFormatError(path, "empty image id", number)
        return ids
    raise DataFormatError(
        path, "image ids must be a .json list or a .txt file with one id per line"
    )


@dataclasses.dataclass(frozen=True)
class CoverageReport:
    """How many captions found a feature for their image, and which images lacked one."""

    kept_captions: int
    skipped_captions: int
    kept_images: int
    skipped_images: int
    example_missing_ids: tuple[str, ...]

    def __str__(self) -> str:
        text = (
            f"{self.kept_captions} captions of {self.kept_images} images have features; "
            f"skipped {self.skipped_captions} captions of {self.skipped_images} images without features"
        )
        if self.example_missing_ids:
            text += f" (e.g. {', '.join(self.example_missing_ids)})"
        return text


def align_captions(
    records: Sequence[CaptionRecord], store: FeatureStore
) -> tuple[list[CaptionRecord], np.ndarray, CoverageReport]:
    """Keeps the captions whose image has a feature; returns them, their store rows and a report.

    Captions without a feature are counted in the report and logged as a
    warning, so a partial feature file can never shrink a dataset unnoticed.
    """
    kept = [record for record in records if record.image_id in store]
    missing_images = Counter(record.image_id for record in records if record.image_id not in store)
    report = CoverageReport(
        kept_captions=len(kept),
        skipped_captions=sum(missing_images.values()),
        kept_images=len({record.image_id for record in kept}),
        skipped_images=len(missing_images),
        example_missing_ids=tuple(list(missing_images)[:EXAMPLE_IDS_SHOWN]),
    )
    if report.skipped_captions:
        logger.warning("features from %s: %s", store.source, report)
    return kept, store.rows(record.image_id for record in kept), report
