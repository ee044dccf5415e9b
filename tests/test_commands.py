"""Every command the documentation shows runs as written: each ``python bench/...``,
``python tools/...`` and ``python -m <this repository's module>`` in README.md, docs/**/*.md,
bench/README.md, bench/RESULTS*.md and the files the manual includes (launch/README.md, the
model card) names a file that exists (fast), and answers
``--help`` (slow: each target starts its own interpreter)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import requires

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = (
    REPO / "README.md",
    *sorted(path for path in (REPO / "docs").rglob("*.md") if "_build" not in path.parts),
    REPO / "bench" / "README.md",
    *sorted((REPO / "bench").glob("RESULTS*.md")),
    # shown in the manual too (docs/launchers.md and docs/model_card.md include them)
    REPO / "launch" / "README.md",
    REPO / "i2ce_jax" / "pretrained" / "MODEL_CARD.md",
)
SCRIPT = re.compile(r"\bpython3? ((?:bench|tools)/[\w/]+\.py)\b")
MODULE = re.compile(r"\bpython3? -m ([A-Za-z_][\w.]*)")
OWN_PACKAGES = {"capsim", "vtfn_jax", "i2ce_jax", "launch", "bench", "tools"}
PLACEHOLDERS = {"bench/NAME.py", "bench/FOLDER/NAME.py", "tools/NAME.py"}
HELP_SECONDS = 60


def documented_targets() -> dict[str, list[str]]:
    """Each unique target (a script path, or ``-m module``) -> the documents naming it."""
    targets: dict[str, list[str]] = {}
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        found = {path for path in SCRIPT.findall(text) if path not in PLACEHOLDERS}
        found |= {
            f"-m {module}"
            for module in MODULE.findall(text)
            if module.split(".")[0] in OWN_PACKAGES
        }
        for target in found:
            targets.setdefault(target, []).append(document.relative_to(REPO).as_posix())
    return targets


def _module_file(module: str) -> Path | None:
    """The file ``python -m module`` runs, read from the tree (nothing is imported)."""
    base = REPO / Path(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__main__.py"):
        if path.is_file():
            return path
    return None


TARGETS = documented_targets()


def test_the_documents_name_the_commands_users_run():
    assert {"bench/throughput.py", "bench/accelerator_check.py"} <= set(TARGETS)
    assert "-m i2ce_jax.rebuild_pretrained" in TARGETS
    assert len(TARGETS) > 20


def test_every_documented_command_names_a_file_that_exists():
    missing = sorted(
        f"{target} (in {', '.join(documents)})"
        for target, documents in TARGETS.items()
        if not (_module_file(target[3:]) if target.startswith("-m ") else (REPO / target).is_file())
    )
    assert not missing, missing


@pytest.mark.slow  # each target imports its stack in a fresh interpreter: minutes in all
@requires("jax")
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_every_documented_command_answers_help(target):
    command = [sys.executable, *target.split(), "--help"]
    done = subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, timeout=HELP_SECONDS, check=False
    )
    needs_torch = "No module named 'torch'" in done.stderr
    if needs_torch and importlib.util.find_spec("torch") is None:
        pytest.skip("imports torch: the bench extra")
    # absl's --help (the training CLIs) prints the flags and exits 1, pointing to --helpfull.
    absl_help = done.returncode == 1 and "--helpfull" in done.stdout
    assert done.returncode == 0 or absl_help, done.stderr[-2000:]
    assert "usage" in done.stdout.lower() or absl_help, done.stdout[-500:]
