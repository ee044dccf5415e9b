"""tools/suite_time.py: its reading of pytest's JUnit XML, on a hand-made file."""

from __future__ import annotations

from tools import suite_time

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.test_a" name="test_one" time="2.5"/>
<testcase classname="tests.test_a" name="test_two" time="1.0"><skipped message="x"/></testcase>
<testcase classname="tests.test_b" name="test_three" time="4.0"><failure message="y"/></testcase>
<testcase classname="tests.test_b" name="test_four[1]" time="0.5"><error message="z"/></testcase>
</testsuite></testsuites>
"""


def test_junit_counts_per_file_seconds_and_slowest(tmp_path):
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    got = suite_time.read_junit(path)
    assert got["counts"] == {"passed": 1, "failed": 2, "skipped": 1}
    assert got["per_file_s"] == {"test_b": 4.5, "test_a": 3.5}
    assert got["slowest"][:2] == [(4.0, "test_b::test_three"), (2.5, "test_a::test_one")]


def test_tables_name_every_tier_and_its_wall_time():
    row = {
        "commit": "abc1234",
        "tier": "fast",
        "command": "python -m pytest -q",
        "wall_s": 300.4,
        "load_before": 0.1,
        "load_after": 1.9,
        "counts": {"passed": 10, "failed": 0, "skipped": 2},
        "per_file_s": {"test_a": 3.5},
        "slowest": [(2.5, "test_a::test_one")],
    }
    text = suite_time.tables([row, {**row, "tier": "slow", "wall_s": 99.6}])
    assert "| abc1234 | fast | `python -m pytest -q` | 300 | 10 | 0 | 2 | 0.10 / 1.90 |" in text
    assert "| abc1234 | slow |" in text and "| 100 |" in text
    assert "| test_a | 3.5 |" in text and "| 2.5 | test_a::test_one |" in text
