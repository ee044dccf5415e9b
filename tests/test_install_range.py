"""The supported JAX range: what the pins admit, what CI proves, and that installing this
repository never replaces a JAX the user already has (Colab, GPU images)."""

from __future__ import annotations

import importlib.metadata as metadata
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import requires
from packaging.requirements import Requirement
from packaging.version import Version

from capsim.extras import JAX_EXTRA

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
OLDEST = REPO / ".ci" / "oldest-constraints.txt"
# The newest releases the fast tier passed on (Python 3.12, 2026-12-04): the pins must admit
# them. Raise with each release the suite is run on.
NEWEST_TESTED = {
    "jax": "0.12.0.1",
    "jaxlib": "0.12.0.1",
    "flax": "0.12.12",
    "optax": "0.2.8",
    "orbax-checkpoint": "0.12.8",
    "grain": "0.2.18",
    "array-record": "0.8.6",
    "tensorflow-datasets": "4.9.10",
}
KEPT = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "grain")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins() -> dict[str, Requirement]:
    extra = PYPROJECT["project"]["optional-dependencies"][JAX_EXTRA]
    return {_canonical(r.name): r for r in map(Requirement, extra)}


def _oldest() -> dict[str, Version]:
    lines = OLDEST.read_text(encoding="utf-8").splitlines()
    pinned = [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]
    return {_canonical(r.name): Version(str(r.specifier).removeprefix("==")) for r in pinned}


def test_the_oldest_constraints_are_the_pins_lower_bounds():
    pins, oldest = _pins(), _oldest()
    assert set(oldest) <= set(pins), set(oldest) - set(pins)
    for name, version in oldest.items():
        lower = [Version(s.version) for s in pins[name].specifier if s.operator == ">="]
        assert lower == [version], (name, pins[name], version)
    assert {"jax", "jaxlib", "flax"} <= set(oldest)


def test_the_pins_admit_the_newest_tested_releases_and_the_installed_ones():
    pins = _pins()
    for name, version in NEWEST_TESTED.items():
        assert pins[name].specifier.contains(version), (name, pins[name], version)
    for name in KEPT:
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # the metrics-only install
        assert pins[name].specifier.contains(installed), (name, pins[name], installed)


def test_the_readme_gives_the_accelerator_lines_with_the_range():
    jax_range = str(_pins()["jax"].specifier)  # e.g. "<0.13,>=0.10.0"
    lower, upper = (
        next(s.version for s in _pins()["jax"].specifier if s.operator == op) for op in (">=", "<")
    )
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for target in ("cuda12", "cuda13", "tpu"):
        line = f'pip install -U "jax[{target}]>={lower},<{upper}"'
        assert line in readme, f"README lacks {line!r} (the pin is {jax_range})"


def _installed(name: str) -> bool:
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def _notebook_install_commands() -> set[tuple[str, ...]]:
    """The pip arguments of each notebook's install cell (after ``pip install``)."""
    commands = set()
    for notebook in sorted((REPO / "colab").glob("*.ipynb")):
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        sources = ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]
        found = [
            match
            for source in sources
            for match in re.findall(r'"-m", "pip", "install", ((?:"[^"]*"(?:, )?)+)\]', source)
        ]
        assert len(found) == 1, f"{notebook.name}: expected one pip install, found {found}"
        commands.add(tuple(re.findall(r'"([^"]*)"', found[0])))
    return commands


def test_the_notebooks_install_cell_never_upgrades_what_is_there():
    for command in _notebook_install_commands():
        assert not {"-U", "--upgrade", "--force-reinstall", "--ignore-installed"} & set(command)
        assert command[-1] == ".[all]", command


@requires("jax")
@requires("setuptools")  # the editable build runs here without build isolation (offline)
def test_the_notebooks_install_cell_would_not_change_the_installed_jax(tmp_path):
    """The cell's own command, as a dry run against this environment (which holds the
    newest JAX in CI's first tier and the oldest in its second): pip's resolver, offline,
    would install this repository and nothing else."""
    extras = PYPROJECT["project"]["optional-dependencies"]
    wanted_extras = Requirement(extras["all"][0]).extras
    absent = sorted(
        r.name
        for extra in wanted_extras
        for r in map(Requirement, extras[extra])
        if not _installed(r.name)
    )
    if absent:
        pytest.skip(f"the README's install is incomplete here (missing {absent}): nothing to keep")
    for k, command in enumerate(sorted(_notebook_install_commands())):
        report = tmp_path / f"report{k}.json"
        offline = ("--dry-run", "--no-index", "--no-build-isolation", "--report", str(report))
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", *command, *offline],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        wanted = {
            _canonical(item["metadata"]["name"]): item["metadata"]["version"]
            for item in json.loads(report.read_text())["install"]
        }
        assert set(wanted) == {"capsim"}, wanted
        for name in KEPT:
            assert name not in wanted, (name, wanted[name], metadata.version(name))
