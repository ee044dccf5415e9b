"""The caption metrics without the JAX stack, and the one line a command prints without it.

This module imports nothing of the [jax] extra, so it runs on a metrics-only install
(``pip install -e .``), as CI's metrics-only step does, and on the full one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from capsim.extras import JAX_EXTRA, missing_jax_stack

REPO = Path(__file__).resolve().parents[1]
NO_JAX = bool(missing_jax_stack())


def _run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def _assert_one_line_naming_the_extra(done: subprocess.CompletedProcess, what: str) -> None:
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got:\n{done.stderr}"
    assert lines[0].startswith(f"error: {what}") and "needs the JAX stack" in lines[0]
    assert f'pip install -e ".[{JAX_EXTRA}]"' in lines[0]
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_a_missing_stack_stops_a_command_with_one_line_naming_the_extra():
    """Whatever is installed here: one module of the stack made to look absent."""
    code = (
        "import capsim.extras as extras\n"
        "extras.JAX_STACK = ('capsim_absent_module',)\n"
        "extras.require_jax_stack('the planted command')\n"
        "print('not reached')\n"
    )
    done = _run("-c", code)
    _assert_one_line_naming_the_extra(done, "the planted command")
    assert "capsim_absent_module" in done.stderr


def test_the_error_is_an_import_error_for_python_callers(monkeypatch):
    from capsim import extras

    monkeypatch.setattr(extras, "JAX_STACK", ("capsim_absent_module",))
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # restored after the test
    with pytest.raises(ImportError, match=r"pip install -e \"\.\[jax\]\""):
        extras.require_jax_stack("a caller")


@pytest.mark.skipif(not NO_JAX, reason="the JAX stack is installed here")
@pytest.mark.parametrize(
    ("module", "what"),
    [
        ("i2ce_jax.train", "i2ce_jax"),
        ("vtfn_jax.train", "vtfn_jax"),
        ("i2ce_jax.score", "i2ce_jax"),
    ],
)
def test_training_and_i2ce_commands_need_the_extra(module, what, tmp_path):
    done = _run("-m", module, "--help", cwd=tmp_path)
    _assert_one_line_naming_the_extra(done, what)


def test_the_drop_in_scores_a_results_file_without_loading_jax(tmp_path):
    """``python -m capsim.metrics.cocoeval`` on a COCO-format pair of files; on a metrics-only
    install this is the whole product, and even on the full one it must not load JAX."""
    images = [{"id": 1}, {"id": 2}]
    references = [
        (1, "a man riding a horse on a beach"),
        (1, "a person rides a brown horse along the shore"),
        (2, "two dogs play with a red ball in the grass"),
        (2, "a pair of dogs chasing a ball on a lawn"),
    ]
    annotations = [
        {"image_id": image, "id": k, "caption": caption}
        for k, (image, caption) in enumerate(references)
    ]
    (tmp_path / "refs.json").write_text(json.dumps({"images": images, "annotations": annotations}))
    results = [
        {"image_id": 1, "caption": "a man rides a horse on the beach"},
        {"image_id": 2, "caption": "a cat sleeps on a sofa"},
    ]
    (tmp_path / "res.json").write_text(json.dumps(results))
    code = (
        "import runpy, sys\n"
        "sys.argv = ['cocoeval', '--annotations', 'refs.json', '--results', 'res.json']\n"
        "try:\n"
        "    runpy.run_module('capsim.metrics.cocoeval', run_name='__main__')\n"
        "except SystemExit as exit:\n"
        "    assert not exit.code, exit.code\n"
        "print('jax loaded:', any(m.split('.')[0] in ('jax', 'flax') for m in sys.modules))\n"
    )
    done = _run("-c", code, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "jax loaded: False" in done.stdout
    scores = json.loads((tmp_path / "res.json.scores.json").read_text())["eval"]
    assert set(scores) == {"Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "ROUGE_L", "CIDEr"}
    assert all(0.0 < value < 10.0 for value in scores.values()), scores
    assert "| METEOR |" in done.stdout and "| CIDEr |" in done.stdout
