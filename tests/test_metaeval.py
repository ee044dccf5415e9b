"""python -m capsim.metaeval: any metric on a user's pair set and absolute set, PERM-BOTH
on every pair of metrics, clusters, and the JSON and CSV it writes."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import numpy as np
import pytest
from test_judgment_files import write_caption_pairs, write_judgment_csv

from capsim import metaeval
from capsim.data.judgment_files import read_judgment_csv


def test_a_pair_set_and_a_csv_set_get_every_figure(tmp_path):
    pairs = write_caption_pairs(tmp_path / "long.jsonl", pairs=40)
    table = write_judgment_csv(tmp_path / "mine.csv", rows=60)
    human = {str(k): j.score for k, j in enumerate(read_judgment_csv(table))}
    rng = np.random.default_rng(0)
    oracle, noise = tmp_path / "oracle.json", tmp_path / "noise.json"
    oracle.write_text(json.dumps({"csv": human, "pairs": _pair_scores(40, rng, right=True)}))
    noise.write_text(
        json.dumps(
            {
                "csv": {k: float(rng.random()) for k in human},
                "pairs": _pair_scores(40, rng, right=False),
            }
        )
    )
    out = tmp_path / "report.json"
    code = metaeval.main(
        [
            "--judgments",
            f"pairs:{pairs},csv:{table}",
            "--scores",
            f"oracle={oracle}",
            "--scores",
            f"noise={noise}",
            "--no_meteor",
            "--permutations",
            "200",
            "--block_size",
            "100",
            "--bootstrap",
            "100",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    result = json.loads(out.read_text())
    metrics = ["BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "ROUGE-L", "CIDEr", "oracle", "noise"]
    for name, statistic in (("pairs", "accuracy"), ("csv", "tau_c")):
        entry = result["sets"][name]
        assert list(entry["metrics"]) == metrics
        for metric in metrics:
            others = entry["comparisons"][metric]
            assert set(others) == set(metrics) - {metric}
            assert all(0 <= e["perm_both_p"] <= 1 for e in others.values())
        assert entry["comparisons"]["oracle"]["noise"]["perm_both_p"] < 0.05
        assert entry["comparisons"]["noise"]["oracle"]["perm_both_p"] > 0.95
        ranks = entry["clusters"]["perm_both"]
        assert ranks["oracle"] == 1 and ranks["noise"] > 1
        assert set(entry["clusters"]) >= {"perm_both", "bootstrap"}
        assert entry["metrics"]["oracle"][statistic]["value"] > 90
    assert result["sets"]["pairs"]["metrics"]["oracle"]["accuracy"]["value"] == 100.0
    assert "acc_eq" in result["sets"]["csv"]["metrics"]["oracle"]
    assert result["sets"]["csv"]["metrics"]["oracle"]["acc_eq"] == 100.0

    with open(out.with_suffix(".csv"), newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * len(metrics)
    oracle_pairs = next(r for r in rows if r["set"] == "pairs" and r["metric"] == "oracle")
    assert oracle_pairs["statistic"] == "accuracy" and float(oracle_pairs["value"]) == 100.0
    assert oracle_pairs["cluster"] == "1" and float(oracle_pairs["ci_low"]) <= 100.0


def _pair_scores(pairs: int, rng, right: bool) -> dict[str, float]:
    """Row ids of a pair set ("{pair}a" better, "{pair}b" worse): always right, or random."""
    scores = {}
    for i in range(pairs):
        a, b = (1.0, 0.0) if right else tuple(rng.random(2))
        scores[f"{i}a"], scores[f"{i}b"] = float(a), float(b)
    return scores


def test_the_command_answers_help_and_refuses_a_bad_file_naming_its_row(tmp_path):
    help_text = subprocess.run(
        [sys.executable, "-m", "capsim.metaeval", "--help"], capture_output=True, text=True
    )
    assert help_text.returncode == 0 and "pairs" in help_text.stdout and "csv" in help_text.stdout
    bad = tmp_path / "bad.csv"
    bad.write_text("mt,refs,score\na dog,\"['a dog']\",1\na cat,\"['a cat']\",oops\n")
    run = subprocess.run(
        [sys.executable, "-m", "capsim.metaeval", "--judgments", f"csv:{bad}", "--no_meteor"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert run.returncode == 1
    assert f"{bad}:3: row 1: score 'oops' is not a number" in run.stderr


@pytest.mark.parametrize("flag", ["--permutations=-1", "--bootstrap=-2"])
def test_negative_counts_are_refused(tmp_path, flag):
    table = write_judgment_csv(tmp_path / "mine.csv", rows=6)
    with pytest.raises(ValueError, match="must be >= 0"):
        metaeval.main(["--judgments", f"csv:{table}", flag, "--out", str(tmp_path / "r.json")])
