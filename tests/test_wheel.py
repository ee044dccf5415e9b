"""The installed packages stand alone: a wheel built here rebuilds a packaged I2CE model
outside the clone, where ``configs/`` cannot be imported."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import import_extra, requires_glove
from test_i2ce_pretrained import check_rebuilt

REPO = Path(__file__).resolve().parents[1]


# What the wheel is built from; setuptools' build/ then lands in the copy, not the clone,
# and holds no file from an earlier build.
SOURCES = ("pyproject.toml", "README.md", "capsim", "vtfn_jax", "i2ce_jax")


@pytest.fixture(scope="module")
def installed_wheel(tmp_path_factory) -> Path:
    """The wheel of this checkout, installed without dependencies into its own folder."""
    import_extra("setuptools")  # both build the wheel offline (--no-build-isolation)
    import_extra("wheel")
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    source.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
            shutil.copytree(REPO / name, source / name, ignore=ignore)
        else:
            shutil.copy2(REPO / name, source / name)
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    subprocess.run([*build, "-w", str(root), str(source)], check=True, capture_output=True)
    (wheel,) = root.glob("capsim-*.whl")
    site = root / "site"
    install = [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(site)]
    subprocess.run([*install, str(wheel)], check=True, capture_output=True)
    return site


def _run_outside_the_clone(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site), "JAX_PLATFORMS": "cpu"}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def test_the_wheel_holds_the_packages_and_the_models_not_configs(installed_wheel):
    (wheel,) = installed_wheel.parent.glob("capsim-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "i2ce_jax/pretrained/recipe.py" in names
    assert "i2ce_jax/pretrained/base/encoder.npz" in names
    assert not [name for name in names if name.startswith(("configs/", "launch/"))]


@pytest.mark.slow  # a training from the installed wheel in its own venv (51 s)
@requires_glove
def test_rebuild_from_the_installed_wheel(installed_wheel, shared_data, tmp_path):
    """``python -m i2ce_jax.rebuild_pretrained`` trains the recipe (runlocal) and exports a model
    that loads and scores (the fast tier's rebuild check)."""
    probe = _run_outside_the_clone(
        installed_wheel,
        tmp_path,
        "-c",
        "import i2ce_jax, importlib.util; print(i2ce_jax.__file__);"
        "print(importlib.util.find_spec('configs'))",
    )
    assert probe.returncode == 0, probe.stderr
    module_file, configs_spec = probe.stdout.split()
    assert Path(module_file).is_relative_to(installed_wheel) and configs_spec == "None"
    out = tmp_path / "exported"
    rebuild = _run_outside_the_clone(
        installed_wheel,
        tmp_path,
        "-m",
        "i2ce_jax.rebuild_pretrained",
        "--name=base",
        f"--data_dir={shared_data}",
        f"--workdir={tmp_path / 'work'}",
        f"--out={out}",
        "--config_arg=runlocal",
    )
    assert rebuild.returncode == 0, rebuild.stderr[-3000:]
    assert "exported" in rebuild.stdout and "sha256" in rebuild.stdout
    assert {path.name for path in out.iterdir()} >= {"encoder.npz", "vocab.json", "encoder.json"}
    check_rebuilt(out, bidirectional=False)
