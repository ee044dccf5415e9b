"""The doors of the meta-evaluation (``python -m capsim.metaeval`` and ``python -m
i2ce_jax.evaluate``): ``--judgments`` repeated or comma-joined, an unknown set one line
and exit 2, and a judgment kind registered from outside going through scoring, the
report, the significance tests and the CSV with no edit of the library."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest
from test_hallucination_sets import write_foil_nocaps, write_hat
from test_judgment_files import write_caption_pairs, write_judgment_csv

from capsim import metaeval
from capsim.data.judgments import Judgment
from capsim.eval import absolute_sets
from capsim.eval import weighted_agreement as weighted
from capsim.eval.judgment_kinds import JudgmentKind
from capsim.eval.judgment_sets import JUDGMENT_SETS, JudgmentSet
from capsim.metrics import resampling
from i2ce_jax import evaluate

DOORS = {"capsim.metaeval": metaeval.main, "i2ce_jax.evaluate": evaluate.main}
FAST = ["--metrics", "BLEU-1,CIDEr", "--permutations", "50", "--block_size", "50"]


@pytest.mark.parametrize("door", DOORS)
def test_an_unknown_set_is_one_line_and_exit_2(door, tmp_path, capsys):
    out = tmp_path / "r.json"
    code = DOORS[door](["--judgments", f"bogus:{tmp_path}", *FAST, "--out", str(out)])
    error = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert error.startswith(f"{door}: error: --judgments wants NAME:PATH") and "'bogus:" in error
    assert error.count("\n") == 1
    pairs = write_caption_pairs(tmp_path / "pairs.jsonl")
    given_twice = ["--judgments", f"pairs:{pairs}", "--judgments", f"pairs:{pairs}"]
    assert DOORS[door]([*given_twice, *FAST, "--out", str(out)]) == 2
    assert "'pairs' is given twice" in capsys.readouterr().err


@pytest.mark.slow
def test_the_i2ce_command_line_says_an_unknown_set_in_one_line(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "i2ce_jax.evaluate", "--judgments", "bogus:x.json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
    assert run.stderr.startswith("i2ce_jax.evaluate: error: --judgments wants NAME:PATH")


@pytest.mark.parametrize("door", DOORS)
def test_judgments_repeated_and_comma_joined_judge_every_set(door, tmp_path):
    pairs = write_caption_pairs(tmp_path / "pairs.jsonl")
    table = write_judgment_csv(tmp_path / "set.csv")
    hat = write_hat(tmp_path / "hat.json")
    foil = write_foil_nocaps(tmp_path / "foil.json")
    out = tmp_path / "r.json"
    argv = [
        *("--judgments", f"pairs:{pairs},csv:{table}"),
        *("--judgments", f"hat:{hat}", "--judgments", f"foil_nocaps:{foil}"),
        *FAST,
        *("--bootstrap", "20", "--out", str(out)),
    ]
    assert DOORS[door](argv) == 0
    sets = json.loads(out.read_text())["sets"]
    assert list(sets) == ["pairs", "csv", "hat", "foil_nocaps"]
    hat_cider = sets["hat"]["metrics"]["CIDEr"]
    assert list(hat_cider) == ["auroc", "average_precision", "chance_average_precision"]
    assert hat_cider["chance_average_precision"]["value"] == pytest.approx(100 / 3)
    assert set(sets["hat"]["clusters"]) == {"perm_both", "bootstrap"}
    assert "perm_both_p" in sets["hat"]["comparisons"]["CIDEr"]["BLEU-1"]
    assert list(sets["foil_nocaps"]["metrics"]["CIDEr"]) == ["accuracy", "in-domain", "near-domain"]
    rows = list(csv.DictReader(out.with_suffix(".csv").open()))
    assert {(r["set"], r["statistic"]) for r in rows} == {
        ("pairs", "accuracy"),
        ("csv", "tau_c"),
        ("hat", "auroc"),
        ("foil_nocaps", "accuracy"),
    }


# --------------------------------------------------------------------------- a toy kind


class MedianSplit:
    """A toy kind: each caption is good or not (its human score above ½), and a metric
    agrees where it scores the caption above its own median exactly when it is good."""

    name = "median split"
    record = Judgment
    statistics = ("agreement",)

    def captions(self, set_name: str, judgments: Sequence[Judgment], row_id) -> tuple:
        pairs = absolute_sets.group_judgments(judgments, row_id)
        return pairs, pairs.ids

    @staticmethod
    def _agreement(pairs: absolute_sets.JudgedPairs, metrics: np.ndarray) -> np.ndarray:
        above = metrics > np.median(metrics, axis=-1, keepdims=True)
        return (above == (pairs.human > 0.5)).astype(float)

    def report(self, captions, scores: Mapping, statistic, resamples, seed, confidence):
        images = captions.image_of_pair
        weights = resampling.group_counts(np.random.default_rng(seed), images, resamples)
        report, full, resampled = {}, {}, {}
        for metric, per_caption in scores.items():
            agree = self._agreement(captions, per_caption)
            full[metric], resampled[metric] = agree.mean(), weights @ agree / weights.sum(1)
            again = resampled[metric][:, None] if resamples else None
            report[metric] = weighted.percent_summaries(
                [full[metric]], again, self.statistics, confidence
            )
        if not resamples:
            return report, {}
        return report, weighted.percent_comparisons(
            weighted.comparisons(full, resampled, confidence)
        )

    def metric_figures(self, captions, per_caption, statistic) -> dict[str, float]:
        return {"above_median": 100 * float((per_caption > np.median(per_caption)).mean())}

    def compared_rows(self, captions, scores, statistic) -> tuple:
        def agreement(metrics: np.ndarray) -> np.ndarray:
            return self._agreement(captions, metrics).mean(1)

        return dict(scores), captions.image_of_pair, agreement


def _read_toy(path: Path, references) -> list[Judgment]:
    rows = json.loads(path.read_text())
    return [
        Judgment(r["image"], r["caption"], str(k), tuple(r["references"]), r["score"])
        for k, r in enumerate(rows)
    ]


def test_a_kind_registered_from_outside_goes_through_every_stage(tmp_path, monkeypatch):
    kind = MedianSplit()
    assert isinstance(kind, JudgmentKind)
    toy = JudgmentSet(
        name="toy",
        path="a JSON list of {image, caption, references, score}",
        read=_read_toy,
        kind=kind,
        statistic="agreement",
        row_ids='"N": the row\'s position',
        row_id=lambda judgment: judgment.candidate_id,
    )
    monkeypatch.setitem(JUDGMENT_SETS, "toy", toy)
    good = np.arange(40) % 2 == 0
    rows = [
        {"image": f"i{k // 4}", "caption": f"thing {k}", "references": ["a thing"], "score": g}
        for k, g in enumerate(good.astype(float))
    ]
    path = tmp_path / "toy.json"
    path.write_text(json.dumps(rows))
    files = {}
    for metric, scores in (
        ("oracle", good + 0.01 * np.arange(40)),
        ("noise", np.cos(np.arange(40))),
    ):
        files[metric] = tmp_path / f"{metric}.json"
        files[metric].write_text(json.dumps({str(k): float(s) for k, s in enumerate(scores)}))
    out = tmp_path / "toy_report.json"
    argv = ["--judgments", f"toy:{path}", "--metrics", "BLEU-1,oracle,noise"]
    argv += [f"--scores=oracle={files['oracle']}", f"--scores=noise={files['noise']}"]
    argv += ["--bootstrap", "40", "--permutations", "100", "--block_size", "50"]
    assert metaeval.main([*argv, "--out", str(out)]) == 0
    entry = json.loads(out.read_text())["sets"]["toy"]
    assert entry["metrics"]["oracle"]["agreement"]["value"] == 100.0
    assert entry["metrics"]["oracle"]["above_median"] == 50.0
    assert entry["comparisons"]["oracle"]["noise"]["perm_both_p"] < 0.05
    assert set(entry["clusters"]) == {"perm_both", "bootstrap"}
    assert all(ranks["oracle"] == 1 < ranks["noise"] for ranks in entry["clusters"].values())
    rows = list(csv.DictReader(out.with_suffix(".csv").open()))
    oracle = next(r for r in rows if r["metric"] == "oracle")
    assert (oracle["set"], oracle["statistic"], float(oracle["value"])) == ("toy", "agreement", 100)
    assert "toy" in metaeval.sets_help()
