"""Modules stay small enough to read: no file of the packages, bench/ or tools/ over 400 lines."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("capsim", "vtfn_jax", "i2ce_jax", "bench", "tools", "launch", "configs")
MAX_LINES = 400


def test_no_module_is_over_the_limit():
    sizes = {
        str(path.relative_to(REPO)): len(path.read_text(encoding="utf-8").splitlines())
        for folder in FOLDERS
        for path in (REPO / folder).rglob("*.py")
    }
    assert len(sizes) > 50  # the walk found the packages
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}
