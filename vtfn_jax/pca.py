"""PCA of image features, fitted on the training split only."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np


@dataclasses.dataclass(frozen=True)
class Pca:
    """A fitted PCA projection: ``(x - mean) @ components.T``."""

    mean: np.ndarray
    components: np.ndarray
    explained_variance: np.ndarray

    @property
    def dim(self) -> int:
        return self.components.shape[0]

    def transform(self, features: np.ndarray) -> np.ndarray:
        features = np.asarray(features, dtype=np.float32)
        if features.ndim != 2 or features.shape[1] != self.mean.shape[0]:
            raise ValueError(
                f"PCA expects [N, {self.mean.shape[0]}] features, got {features.shape}"
            )
        return ((features - self.mean) @ self.components.T).astype(np.float32)

    def save(self, path: str | Path) -> None:
        with Path(path).open("wb") as file:  # a file object keeps numpy from appending ".npz"
            np.savez(
                file,
                mean=self.mean,
                components=self.components,
                explained_variance=self.explained_variance,
            )

    @classmethod
    def load(cls, path: str | Path) -> Pca:
        with np.load(path, allow_pickle=False) as arrays:
            return cls(arrays["mean"], arrays["components"], arrays["explained_variance"])


def fit_pca(features: np.ndarray, dim: int) -> Pca:
    """Fits PCA by SVD; pass the training rows only so no test statistics leak in.

    Each component's sign is fixed (largest-magnitude loading positive), so the
    same features give the same projection on every platform.
    """
    features = np.asarray(features, dtype=np.float64)
    if features.ndim != 2:
        raise ValueError(f"PCA expects a 2-D [N, D] array, got shape {features.shape}")
    if not 1 <= dim <= min(features.shape):
        raise ValueError(
            f"PCA dim must be in [1, {min(features.shape)}] for {features.shape} features, got {dim}"
        )
    mean = features.mean(axis=0)
    _, singular_values, components = np.linalg.svd(features - mean, full_matrices=False)
    components = components[:dim]
    signs = np.sign(components[np.arange(dim), np.argmax(np.abs(components), axis=1)])
    components = components * signs[:, None]
    explained_variance = singular_values[:dim] ** 2 / max(features.shape[0] - 1, 1)
    return Pca(
        mean.astype(np.float32),
        components.astype(np.float32),
        explained_variance.astype(np.float32),
    )
