"""bench/harness.py: where a script's command says it lives, a tagged run's JSON and section,
and the cells the bench tables share."""

from __future__ import annotations

import json
import sys

import pytest

from bench import harness

ROW = {"name": "x", "ours": 20.0, "reference": 10.0, "load_start": 1.0, "load_end": 2.5}
ROW |= {"ratio_median": 2.0, "ratio_min": 1.5, "ratio_max": 2.25}


def test_a_script_is_found_in_its_folder_and_a_name_in_two_folders_is_refused():
    assert harness.script_path("meta_evaluation") == "bench/quality/meta_evaluation.py"
    assert harness.script_path("suite_time") == "tools/suite_time.py"
    with pytest.raises(ValueError, match=r"2 scripts named input_wait\.py"):
        harness.script_path("input_wait")


def test_a_tagged_run_writes_its_own_json_and_section_under_its_command(tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(harness, "RESULTS_MD", tmp_path / "RESULTS.md")
    monkeypatch.setattr(sys, "argv", ["i2ce_retrain.py", "--tag", "new"])
    harness.record_results("i2ce_retrain", {"rows": 1}, "## Retrain", "the table", tag="new")
    assert json.loads((tmp_path / "i2ce_retrain_new.json").read_text()) == {"rows": 1}
    section = (tmp_path / "RESULTS.md").read_text().split("\n## ")[-1]
    assert section == (
        "Retrain: new\n\nCommand: `python bench/quality/i2ce_retrain.py --tag new`\n\nthe table\n"
    )


def test_the_shared_cells_and_the_ours_against_reference_table():
    assert harness.ratio_cells(ROW) == ["2.00", "1.50", "2.25"]
    assert harness.ratio_spread(ROW, ".1f") == "2.0 (1.5-2.2)"
    assert harness.spread_cell([3.0, 1.0, 2.0]) == "2.00 (1.00-3.00)"
    assert harness.load_cell(ROW) == "1.00 / 2.50"
    table = harness.ratio_table([ROW], "ex/s", {"extra": lambda r: "e"})
    assert table.splitlines()[0] == (
        "| row | ours (ex/s) | reference (ex/s) | ratio median | min | max | extra "
        "| load start / end |"
    )
    assert table.splitlines()[-1] == "| x | 20 | 10 | 2.00 | 1.50 | 2.25 | e | 1.00 / 2.50 |"
