"""The Colab notebooks run top to bottom (RUNLOCAL) and show their tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import import_extra

nbformat = import_extra("nbformat")
nbclient = import_extra("nbclient")
import_extra("matplotlib")  # the notebooks draw plots

REPO = Path(__file__).resolve().parents[1]
COLAB = REPO / "colab"
CELL_TIMEOUT_S = 600
RUNLOCAL_OFF = "RUNLOCAL = False"
RUNLOCAL_ON = "RUNLOCAL = True"


def _run_notebook(name: str, tmp_path: Path, monkeypatch) -> list[str]:
    """Executes colab/<name> with RUNLOCAL on; returns each code cell's outputs as text."""
    nb = nbformat.read(COLAB / name, as_version=4)
    (parameters,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    parameters.source = parameters.source.replace(RUNLOCAL_OFF, RUNLOCAL_ON)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the notebooks' workdirs go under tmp_path
    nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(REPO)}},  # run inside the clone, as on Colab
    ).execute()
    return [json.dumps(cell.outputs) for cell in nb.cells if cell.cell_type == "code"]


def _check_static_parts(name: str, path: str) -> None:
    nb = nbformat.read(COLAB / name, as_version=4)
    nbformat.validate(nb)
    assert (
        f"colab.research.google.com/github/capsim-dev/capsim/blob/main/{path}" in nb.cells[0].source
    )
    code = [cell.source for cell in nb.cells if cell.cell_type == "code"]
    assert all(source.startswith("#@title") for source in code)
    assert 'if "google.colab" in sys.modules:' in code[0]
    assert 'CAPSIM_SOURCE = "' in code[0]  # the one install source a user sets


@pytest.mark.parametrize("name", ["vtfn_demo.ipynb", "i2ce_demo.ipynb", "score_captions.ipynb"])
def test_notebook_has_badge_titles_and_colab_only_install(name):
    _check_static_parts(name, f"colab/{name}")


def _has_image(output: str) -> bool:
    return "image/png" in output


def test_vtfn_notebook_runs(tmp_path, monkeypatch):
    outputs = _run_notebook("vtfn_demo.ipynb", tmp_path, monkeypatch)
    results_table, synonyms_table, plots = outputs[-3:]
    assert _has_image(plots)
    assert "same/different-image AUC" in results_table
    assert "grounding-only synonym Spearman" in results_table
    assert "| caption | variant | gold (0-5) | cosine |" in synonyms_table
    assert list(tmp_path.glob("vtfn_demo_bow_*/results.json"))


@pytest.mark.slow  # the I2CE demo's whole training (33 s); fast: test_i2ce trains it
def test_i2ce_notebook_runs(tmp_path, monkeypatch):
    outputs = _run_notebook("i2ce_demo.ipynb", tmp_path, monkeypatch)
    tau_table, scores, similarities, plots = outputs[-4:]
    assert _has_image(plots)
    for metric in ("I2CE", "BLEU-4", "CIDEr"):
        assert f"| {metric} |" in tau_table
    assert "| candidate | error | rule quality | I2CE |" in scores
    assert "mean I2CE over" in scores
    assert "| candidate | ref 1 |" in similarities
    assert list(tmp_path.glob("i2ce_demo_*/results.json"))


def test_score_captions_notebook_runs(tmp_path, monkeypatch):
    outputs = _run_notebook("score_captions.ipynb", tmp_path, monkeypatch)
    table, bars = outputs[-2:]
    assert "| candidate | I2CE | BLEU-4 | CIDEr-D |" in table
    assert "mean I2CE over 5 candidates" in table
    assert _has_image(bars)
