"""The markdown tables jobs and benches print, and a run's results as rows of them."""

from __future__ import annotations

import numpy as np
import pytest

from capsim.tables import format_cells, format_table, results_rows


def test_format_table_renders_markdown_with_two_decimals():
    rows = [
        {"metric": "BLEU-4", "tau_c": 30.7757, "n": 5664},
        {"metric": "A|B", "tau_c": np.float32(1)},
    ]
    with pytest.raises(ValueError, match=r"row 1 has no value for column\(s\) \['n'\]"):
        format_table(rows, ["metric", "tau_c", "n"])
    assert format_table(rows, ["metric", "tau_c"]) == (
        "| metric | tau_c |\n|---|---|\n| BLEU-4 | 30.78 |\n| A\\|B | 1.00 |"
    )


def test_format_cells_is_format_table_of_rows_given_in_column_order():
    columns = ["metric", "tau_c"]
    assert format_cells(columns, [["BLEU-4", "30.8"], ["A|B", 1.0]]) == (
        "| metric | tau_c |\n|---|---|\n| BLEU-4 | 30.8 |\n| A\\|B | 1.00 |"
    )
    with pytest.raises(ValueError):
        format_cells(columns, [["a row one cell short"]])


def test_results_rows_keep_numbers_one_level_down_and_each_sts_years_means():
    results = {
        "same_diff": {"auc": 88.4, "pairs": 1000, "ok": True, "notes": "x"},
        "sts": {"2014": {"pearson_mean": 61.234, "spearman_mean": 58.0, "images": {}}},
        "steps": 120,
    }
    assert results_rows(results) == [
        {"task": "same_diff", "measure": "auc", "value": 88.4},
        {"task": "same_diff", "measure": "pairs", "value": 1000},
        {"task": "sts 2014", "measure": "pearson / spearman mean", "value": "61.23 / 58.00"},
    ]
