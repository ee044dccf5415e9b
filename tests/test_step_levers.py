"""bench/speed/step_levers.py and step_host.py (issue 48 §2) at test sizes: each table and its
rows."""

from __future__ import annotations

import pytest

from bench.cases import step_host
from bench.speed import step_levers


@pytest.fixture(scope="module")
def toy_run():
    argv = ["--toy", "--batch", "8", "--rounds", "2", "--key_steps", "5", "--input_batch", "16"]
    return step_levers.main(argv)


def test_parts_share_the_step_and_name_both_dtypes(toy_run):
    parts = toy_run["parts"]
    assert {(r["part"], r["dtype"]) for r in parts} == {
        (part, dtype)
        for part in ("readout", "decoder GRU", "whole step")
        for dtype in ("float32", "bfloat16")
    }
    for row in parts:
        assert row["ms"] > 0
        if row["part"] == "whole step":
            assert row["share_of_step"] == 1.0


def test_each_lever_is_timed_against_the_shipped_step_and_keeps_its_loss(toy_run):
    levers = toy_run["levers"]
    names = {(r["lever"], r["dtype"]) for r in levers}
    assert ("logits in bfloat16", "bfloat16") in names
    assert ("logits in bfloat16", "float32") not in names  # float32 has no such lever
    assert {("decoder unrolled x2", d) for d in ("float32", "bfloat16")} <= names
    for row in levers:
        assert row["ratio_min"] <= row["ratio_median"] <= row["ratio_max"]
        assert row["examples_per_second"] > 0
        tolerance = 1e-5 if "unrolled" in row["lever"] else 1e-2
        assert abs(row["first_loss"] - row["first_loss_shipped"]) <= tolerance * abs(
            row["first_loss_shipped"]
        ), row


def test_the_host_key_rows_cover_every_case(toy_run):
    rows = toy_run["host_key"]
    assert [r["model"] for r in rows] == list(step_host.CASES)
    for row in rows:
        assert row["step_us_key_in_step"] > 0 and row["step_us_key_on_host"] > 0


def test_placement_rows_time_each_input_path(toy_run):
    rows = toy_run["placement"]
    assert [r["batch_of"] for r in rows] == [
        "I2CE-paper-scale",
        "VTFN-GRU, device tables",
        "VTFN-GRU, host gather",
    ]
    assert [r["arrays"] for r in rows] == [3, 4, 4]
    by_name = {r["batch_of"]: r for r in rows}  # image rows instead of features: smaller
    assert (
        by_name["VTFN-GRU, device tables"]["megabytes"]
        < by_name["VTFN-GRU, host gather"]["megabytes"]
    )
    for row in rows:
        assert row["batch"] == 16 and row["us_one_call"] > 0 and row["us_per_array"] > 0


def test_tables_print_one_row_per_measurement(toy_run):
    assert step_levers.levers_table(toy_run["levers"]).count("\n") == len(toy_run["levers"]) + 1
    assert "share of the step" in step_levers.parts_table(toy_run["parts"])


def test_the_results_section_holds_every_table_and_the_command(toy_run):
    section = step_levers.results_section(toy_run)
    assert section.startswith(step_levers.RESULTS_TITLE + "\n")
    assert "Command: `python bench/speed/step_levers.py --batch 8 --rounds 2`" in section
    for table in (
        step_levers.parts_table(toy_run["parts"]),
        step_levers.levers_table(toy_run["levers"]),
        step_host.host_key_table(toy_run["host_key"]),
        step_host.placement_table(toy_run["placement"]),
    ):
        assert table in section
