"""bench/RESULTS.md's VTFN section is what bench/quality/vtfn_figures.py renders from vtfn.json."""

from __future__ import annotations

import json
from pathlib import Path

from bench import harness
from bench.quality import vtfn_figures

REPO = Path(__file__).resolve().parents[1]


def test_the_vtfn_section_renders_from_its_json():
    result = json.loads((REPO / "bench" / "results" / "vtfn.json").read_text())
    markdown = harness.RESULTS_MD.read_text()
    start = markdown.index(vtfn_figures.SECTION + "\n")
    end = markdown.index("\n## ", start + len(vtfn_figures.SECTION))
    assert vtfn_figures.render(result).strip() == markdown[start:end].strip()
