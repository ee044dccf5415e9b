"""capsim.eval.set_comparisons: every registered judgment set goes through scoring, the
report and the significance tests by its registry ``kind`` alone, the report it is given
is left as it was, and the clusters follow mt-metrics-eval's AssignRanks."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from capsim.data.judgments import Judgment, LabelJudgment, PairJudgment
from capsim.eval import judgment_harness as harness
from capsim.eval import judgment_kinds as kinds
from capsim.eval.absolute_sets import STATISTICS
from capsim.eval.judgment_kinds import JudgmentKind
from capsim.eval.judgment_sets import JUDGMENT_SETS, judgment_set
from capsim.eval.set_comparisons import compare_metrics, significance_clusters

CATEGORIES = ("HC", "MM")


def _quality(caption: str) -> float:
    """The quality a test caption carries in its last word ("... q3")."""
    return float(caption.rsplit("q", 1)[1])


def _oracle(gts, res):
    scores = np.array([_quality(res[k][0]) for k in res]) + 1e-3 * np.arange(len(res))
    return float(scores.mean()), scores


def _noise(gts, res):
    scores = np.random.default_rng(len(res)).normal(size=len(res))
    return float(scores.mean()), scores


def _judgments(kind: JudgmentKind) -> list:
    """40 judgments of ``kind``, two an image; the oracle agrees with the humans."""
    rng = np.random.default_rng(0)
    if kind is kinds.CAPTION_LABELS:
        return [
            LabelJudgment(
                f"img{i // 2}", f"caption {i} q{i % 3}", str(i), ("a reference",), i % 3 == 0
            )
            for i in range(40)
        ]
    if kind is kinds.ABSOLUTE:
        return [
            Judgment(
                f"img{i // 2}",
                f"caption {i} q{score}",
                str(i),
                ("a reference", "another reference"),
                float(score),
                system=f"system{i % 3}",
            )
            for i, score in enumerate(rng.integers(1, 5, 40))
        ]
    return [
        PairJudgment(
            f"img{i // 2}",
            f"better {i} q{3 + i % 2}",
            f"worse {i} q{1 + i % 2}",
            tuple(f"reference {k}" for k in range(6)),
            1.0,
            CATEGORIES[i % 2],
        )
        for i in range(40)
    ]


def _judged(name: str) -> tuple[dict, dict]:
    """(the set's figures as the command writes them, ``set_report``'s report), checking
    that adding the field's figures left ``set_report``'s output as it was."""
    kind = judgment_set(name).kind
    scored = harness.score_set(
        name, _judgments(kind), {"oracle": _oracle, "noise": _noise}, builtin=()
    )
    report, comparisons = harness.set_report(scored, resamples=30, seed=0)
    given = json.dumps([report, comparisons])
    compared = compare_metrics(scored, report, comparisons, permutations=60, seed=0)
    assert json.dumps([report, comparisons]) == given, "compare_metrics changed its input"
    return dataclasses.asdict(compared), report


COLUMNS = {
    kinds.ABSOLUTE: lambda statistic: [
        statistic,
        *(s for s in STATISTICS if s != statistic),
    ],
    kinds.VOTED_PAIRS: lambda statistic: [*CATEGORIES, "mean"],
    kinds.BETTER_WORSE: lambda statistic: ["accuracy", *CATEGORIES],
    kinds.CAPTION_LABELS: lambda statistic: [
        "auroc",
        "average_precision",
        "chance_average_precision",
    ],
}


@pytest.mark.parametrize("name", list(JUDGMENT_SETS))
def test_each_set_is_scored_reported_and_tested_by_its_kind(name, monkeypatch):
    entry = judgment_set(name)
    compared, report = _judged(name)
    metrics = compared["metrics"]
    # the report: its kind's columns, the set's statistic heading them
    columns = COLUMNS[entry.kind](entry.statistic)
    assert list(report["oracle"])[: len(columns)] == columns
    assert entry.statistic in columns
    item_figures = {f"{entry.statistic}_item_grouped", "pairwise_accuracy", "acc_eq"}
    has_item_figures = item_figures <= set(metrics["oracle"])
    assert has_item_figures == (entry.kind is kinds.ABSOLUTE)
    # the tests: PERM-BOTH both ways, the oracle first in every cluster
    for first, second in (("oracle", "noise"), ("noise", "oracle")):
        entry_p = compared["comparisons"][first][second]
        assert 0 < entry_p["perm_both_p"] <= 1 and "p_value" in entry_p
    assert compared["comparisons"]["oracle"]["noise"]["perm_both_p"] < 0.05
    tests = {"perm_both", "bootstrap"} | ({"williams"} if entry.kind is kinds.ABSOLUTE else set())
    assert set(compared["clusters"]) == tests
    assert all(ranks["oracle"] == 1 < ranks["noise"] for ranks in compared["clusters"].values())
    # the registry entry alone decides: the same entry under another name gives the same
    monkeypatch.setitem(JUDGMENT_SETS, "probe", dataclasses.replace(entry, name="probe"))
    probe, _ = _judged("probe")
    assert json.dumps(probe) == json.dumps(compared)


def test_a_pair_set_changes_its_figures_with_its_kind(monkeypatch):
    """The same pairs declared voted (PASCAL-50S's mean over categories) or better-worse
    (the share of pairs): the kind, not the set's name or record type, picks the report."""
    for kind, statistic in (
        (kinds.VOTED_PAIRS, "mean"),
        (kinds.BETTER_WORSE, "accuracy"),
    ):
        spec = dataclasses.replace(
            judgment_set("pairs"), name="probe", kind=kind, statistic=statistic
        )
        monkeypatch.setitem(JUDGMENT_SETS, "probe", spec)
        _, report = _judged("probe")
        assert list(report["oracle"]) == COLUMNS[kind](statistic)


def _assign_ranks(matrix: np.ndarray, alpha: float) -> list[int]:
    """mt-metrics-eval's AssignRanks, re-derived: matrix[i, j] is the p-value that metric i
    (sorted best first) beats metric j."""
    ranks, rank, start = [], 1, 0
    for i in range(matrix.shape[0]):
        if (matrix[start:i, i] <= alpha).any():
            rank, start = rank + 1, i
        ranks.append(rank)
    return ranks


def test_significance_clusters_follow_assign_ranks():
    rng = np.random.default_rng(2)
    for _ in range(30):
        n = int(rng.integers(2, 8))
        names = [f"m{k}" for k in range(n)]
        values = dict(zip(names, rng.permutation(n).astype(float), strict=True))
        p = {(a, b): float(rng.random() * 0.2) for a in names for b in names if a != b}
        order = sorted(names, key=lambda m: -values[m])
        matrix = np.ones((n, n))
        for i, a in enumerate(order):
            for j, b in enumerate(order):
                if a != b:
                    matrix[i, j] = p[a, b]
        expected = dict(zip(order, _assign_ranks(matrix, 0.05), strict=True))
        assert significance_clusters(values, p) == expected


def test_clusters_by_hand():
    """A beats C but not B; B beats nobody significantly: A, B share rank 1, C starts rank
    2 and D, level with C, stays there."""
    values = {"A": 0.5, "B": 0.45, "C": 0.3, "D": 0.29}
    p = {(a, b): 0.5 for a in values for b in values if a != b}
    p["A", "C"] = 0.01
    p["A", "D"] = 0.01
    assert significance_clusters(values, p) == {"A": 1, "B": 1, "C": 2, "D": 2}
