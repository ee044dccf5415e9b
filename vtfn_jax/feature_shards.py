"""The resumable output of feature extraction: numbered shards and the run that wrote them.

``python -m vtfn_jax.extract_features`` writes features in shards as it goes, so a
crash redoes at most one shard; ``run.json`` records the model and preprocessing,
so features of two different runs never mix in one folder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from capsim.errors import DataFormatError
from vtfn_jax.features import FeatureStore

SHARDS_DIR = "shards"
RUN_FILE = "run.json"


class ShardWriter:
    """Buffers features and writes them as numbered shards under out/shards.

    A shard's ids file is written last, after its features, so only complete
    shards are read back on resume.
    """

    def __init__(self, directory: Path, done: dict[str, np.ndarray]):
        self.directory = directory
        self.done = done
        directory.mkdir(parents=True, exist_ok=True)
        self.next_index = 1 + max((self._index(path) for path in self._id_files()), default=-1)
        self.pending_ids: list[str] = []
        self.pending_features: list[np.ndarray] = []

    @staticmethod
    def _index(ids_path: Path) -> int:
        return int(ids_path.name.removeprefix("shard_").removesuffix(".ids.json"))

    def _id_files(self) -> list[Path]:
        return sorted(self.directory.glob("shard_*.ids.json"))

    def read_all(self) -> None:
        """Adds the features of every complete shard to ``done``."""
        for ids_path in self._id_files():
            features_path = ids_path.with_name(ids_path.name.removesuffix(".ids.json") + ".npy")
            store = FeatureStore.from_npy(features_path, ids_path)
            self.done.update(zip(store.ids, store.matrix, strict=True))

    def add(self, ids: list[str], features: np.ndarray) -> None:
        self.pending_ids += ids
        self.pending_features.append(features)

    def flush(self) -> None:
        if not self.pending_ids:
            return
        ids, features = self.pending_ids, np.concatenate(self.pending_features)
        stem = self.directory / f"shard_{self.next_index:05d}"
        tmp_features = stem.with_suffix(".npy.tmp")
        with tmp_features.open("wb") as file:
            np.save(file, features)
        os.replace(tmp_features, stem.with_suffix(".npy"))
        tmp_ids = stem.with_suffix(".ids.json.tmp")
        tmp_ids.write_text(json.dumps(ids), encoding="utf-8")
        os.replace(tmp_ids, stem.with_suffix(".ids.json"))
        self.next_index += 1
        self.done.update(zip(ids, features, strict=True))
        self.pending_ids, self.pending_features = [], []

    def remove(self) -> None:
        for path in self.directory.iterdir():
            path.unlink()
        self.directory.rmdir()


def check_run(out_dir: Path, run: dict) -> None:
    """Refuses to mix features of different models or preprocessing in one output folder."""
    run_path = out_dir / RUN_FILE
    if run_path.is_file():
        previous = json.loads(run_path.read_text(encoding="utf-8"))
        if previous != run:
            raise DataFormatError(
                run_path, f"written by a run with {previous}, this run has {run}; use a new --out"
            )
    else:
        run_path.write_text(json.dumps(run, indent=2), encoding="utf-8")
