"""Test modules import only what the install brings: optional packages through conftest's
requires()/import_extra(), which skip naming the extra, never by an import statement.

Read statically, so a test module that would fail to import on a core-only or the
README's install fails here, on any install. The rules:
- an import statement in a test module (at any level) names the standard library, this
  repository, or a package that ``pip install -e . pytest pytest-xdist`` brings (the caption
  metrics' install); a module that reaches the JAX stack at import time
  (conftest.needs_jax_stack: not collected without it) may also name what the [jax] extra
  brings;
- an optional module is reached with ``import_extra("M")``, ``requires("M")`` or
  ``pytest.importorskip("M", reason=skip_reason("M"))``, and M is in conftest.EXTRAS;
- a bench module a test imports (and every bench module it imports in turn) imports, at
  its module level, only those packages and the ones that test module imports as extras;
- a test module that needs the bench extra carries the ``bench`` marker (CI's bench step).
"""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import EXTRAS, needs_jax_stack, requires, third_party_reached
from packaging.requirements import Requirement

from capsim.extras import JAX_EXTRA, JAX_STACK

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
FIRST_PARTY = {"capsim", "vtfn_jax", "i2ce_jax", "bench", "tools", "configs", "launch", "conftest"}
FIRST_PARTY |= {path.stem for path in TESTS.glob("*.py")}  # tests import their siblings
GUARDS = {"import_extra", "requires", "importorskip"}
BENCH_ROOTS = {"bench", "tools"}  # used from a clone; their modules import the bench extra


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_closure(roots: list[str], extras: tuple[str, ...] = ()) -> set[str]:
    """Canonical names of the installed distributions that ``roots[extras]`` pulls in."""
    seen: set[str] = set()
    stack = [(root, extras) for root in roots]
    while stack:
        name, wanted = stack.pop()
        if _canonical(name) in seen:
            continue
        seen.add(_canonical(name))
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            requirement = Requirement(line)
            marker = requirement.marker
            if marker is None or any(marker.evaluate({"extra": e}) for e in ("", *wanted)):
                stack.append((requirement.name, tuple(requirement.extras)))
    return seen


def installed_modules(roots: list[str], extras: tuple[str, ...] = ()) -> set[str]:
    """Top-level module names that ``pip install roots[extras]`` brings."""
    closure = requirement_closure(roots, extras)
    return {
        module
        for module, dists in metadata.packages_distributions().items()
        if any(_canonical(dist) in closure for dist in dists)
    }


def core_modules() -> set[str]:
    """Top-level module names that ``pip install -e . pytest pytest-xdist`` brings."""
    return installed_modules(["capsim", "pytest", "pytest-xdist"])


def jax_extra_modules() -> set[str]:
    """Top-level module names that ``pip install -e ".[jax]"`` brings."""
    return installed_modules(["capsim"], (JAX_EXTRA,))


def _module_level(tree: ast.Module) -> Iterator[ast.AST]:
    """The nodes that run when the module is imported (function bodies do not)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                stack.append(child)


def imported(nodes: Iterator[ast.AST]) -> Iterator[tuple[int, str]]:
    """(line, dotted module) of every import statement among ``nodes``."""
    for node in nodes:
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
            if node.module.split(".")[0] in BENCH_ROOTS:  # from bench.cases import step_host
                yield from ((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)


def guarded(tree: ast.Module) -> Iterator[tuple[int, str, ast.Call]]:
    """(line, module, call) of every import_extra / requires / pytest.importorskip call."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            argument = node.args[0]
            if name in GUARDS and isinstance(argument, ast.Constant):
                yield node.lineno, str(argument.value), node


def bench_imports(module: str, seen: set[str]) -> Iterator[tuple[str, int, str]]:
    """(bench file, line, module) of the module-level imports of a bench or tools module and
    of the bench modules it imports in turn (a name that is not a module file is skipped)."""
    path = REPO / Path(*module.split(".")).with_suffix(".py")
    if module in seen or not path.is_file():
        return
    seen.add(module)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for line, name in imported(_module_level(tree)):
        yield path.relative_to(REPO).as_posix(), line, name
        if name.split(".")[0] in BENCH_ROOTS:
            yield from bench_imports(name, seen)


def install_violations(core: set[str], jax_extra: set[str] = frozenset()) -> list[str]:
    """Every breach of the module docstring's rules, named by file and line."""
    stdlib = sys.stdlib_module_names
    problems = []
    for path in sorted(TESTS.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = f"tests/{path.name}"
        allowed = core | FIRST_PARTY | set(stdlib)
        if needs_jax_stack(path):
            allowed |= jax_extra
        extras = set()
        for line, module, call in guarded(tree):
            top = module.split(".")[0]
            extras.add(top)
            if top not in EXTRAS:
                problems.append(f"{where}:{line}: {top} is not in conftest.EXTRAS")
            reason = next((k.value for k in call.keywords if k.arg == "reason"), None)
            is_importorskip = getattr(call.func, "attr", "") == "importorskip"
            if is_importorskip and not (
                isinstance(reason, ast.Call) and getattr(reason.func, "id", "") == "skip_reason"
            ):
                problems.append(f"{where}:{line}: importorskip({module!r}) names no extra")
        statements = list(imported(ast.walk(tree)))
        for line, module in statements:
            if module.split(".")[0] not in allowed:
                problems.append(
                    f"{where}:{line}: imports {module}, which a core install does not bring:"
                    f' use import_extra("{module}")'
                )
        seen: set[str] = set()
        for _, module in statements:
            if module.split(".")[0] in BENCH_ROOTS:
                for bench_file, line, name in bench_imports(module, seen):
                    if name.split(".")[0] not in allowed | extras:
                        problems.append(
                            f"{bench_file}:{line}: imports {name} at module level, reached"
                            f" from {where}, which does not import_extra it"
                        )
        needs_bench = any(EXTRAS.get(top) == "bench" for top in extras)
        if needs_bench and "mark.bench" not in ast.unparse(tree):
            problems.append(f"{where}: needs the bench extra but has no pytest.mark.bench")
    return problems


@requires("jax")  # what the [jax] extra brings is read off its installed packages
def test_test_modules_import_only_what_the_install_brings():
    assert install_violations(core_modules(), jax_extra_modules()) == []


@requires("jax")
def test_the_caption_metrics_install_brings_no_part_of_the_jax_stack():
    assert not core_modules() & set(JAX_STACK)
    assert set(JAX_STACK) <= jax_extra_modules()
    # The metrics' own tests and the drop-in's command reach none of it.
    for name in ("test_ngram.py", "test_bootstrap.py"):
        assert not needs_jax_stack(TESTS / name), name
    cocoeval = REPO / "capsim" / "metrics" / "cocoeval.py"
    assert not third_party_reached(cocoeval) & set(JAX_STACK)
    assert needs_jax_stack(TESTS / "test_trainer.py")


def test_a_module_reaching_jax_through_the_repository_needs_the_jax_stack(tmp_path):
    import conftest

    def planted(name: str, source: str) -> Path:
        path = tmp_path / f"test_{name}.py"  # one file each: their imports are cached
        path.write_text(source)
        return path

    later = planted("later", "import numpy\n\ndef f():\n    import jax\n")
    assert not conftest.needs_jax_stack(later)  # a function body runs later, if ever
    assert conftest.needs_jax_stack(planted("embed", "from capsim import embed\n"))
    assert conftest.needs_jax_stack(planted("i2ce", "from i2ce_jax import scorer\n"))


def test_the_check_finds_an_unguarded_import_and_a_bench_module_importing_torch(
    tmp_path, monkeypatch
):
    planted = tmp_path / "test_planted.py"
    planted.write_text("import torch\nfrom bench.throughput_tables import i2ce_step\n")
    monkeypatch.setattr(sys.modules[__name__], "TESTS", tmp_path)
    problems = install_violations({"numpy", "pytest"}, {"jax", "flax"})
    assert any(p.startswith("tests/test_planted.py:1: imports torch") for p in problems)
    assert any(
        p.startswith("bench/throughput_tables/i2ce_step.py") and "imports torch" in p
        for p in problems
    )
    planted.write_text('import pytest\npytest.importorskip("torch")\n')
    assert install_violations({"pytest"}) == [
        "tests/test_planted.py:2: importorskip('torch') names no extra",
        "tests/test_planted.py: needs the bench extra but has no pytest.mark.bench",
    ]


def test_every_extra_in_the_table_is_the_one_that_brings_its_package():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    extras = pyproject["project"]["optional-dependencies"]
    dists = metadata.packages_distributions()
    for module, extra in EXTRAS.items():
        assert extra in extras, f"{module}: no extra {extra!r} in pyproject.toml"
        if module not in dists:
            continue  # not installed here: nothing to compare
        brought = requirement_closure([Requirement(r).name for r in extras[extra]])
        assert {_canonical(d) for d in dists[module]} & brought, (module, extra)


def test_ci_runs_the_readme_install_which_brings_every_extra_but_bench_and_tf():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (everything,) = pyproject["project"]["optional-dependencies"]["all"]
    assert set(Requirement(everything).extras) == set(EXTRAS.values()) - {"bench", "tf"}
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert 'pip install -e ".[all]"' in readme and 'pip install -e ".[all]"\n' in ci
    assert "python -m pytest -q\n" in readme and "\npython -m pytest -q\n" in ci  # the fast tier


def test_an_absent_extra_skips_naming_it(monkeypatch):
    import conftest

    absent = "capsim_no_such_module"
    monkeypatch.setitem(conftest.EXTRAS, absent, "viz")
    with pytest.raises(
        pytest.skip.Exception, match=rf"needs {absent} \(pip install -e '\.\[viz\]'\)"
    ):
        conftest.import_extra(f"{absent}.sub")
    assert conftest.requires(absent).args == (True,)
