"""python -m i2ce_jax.evaluate: each judgment set's protocol, on fixtures and on Flickr8k-Expert."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from test_judgments import _write_pascal

from capsim import metaeval
from capsim.data.judgments import Judgment, PairJudgment
from capsim.errors import DataFormatError
from capsim.eval import judgment_harness as harness
from capsim.eval import pairwise_sets
from capsim.eval.absolute_sets import absolute_report
from capsim.eval.judgment_sets import judgment_set, load_set
from i2ce_jax import evaluate

FIXTURES = Path(__file__).parent / "fixtures" / "judgments"
BENCH_JSON = Path(__file__).resolve().parents[1] / "bench" / "results" / "i2ce_flickr8k_expert.json"


def _run(tmp_path, *args) -> dict:
    out = tmp_path / "evaluation.json"
    assert evaluate.main([*args, "--no_meteor", "--out", str(out)]) == 0
    return json.loads(out.read_text())


def test_absolute_statistics_match_scipy():
    judgments = [
        Judgment(f"img{i % 3}", f"caption {i}", str(i), ("a ref",), score, system=f"S{i % 4}")
        for i, score in enumerate([1, 3, 2, 4, 4, 1, 2, 3])
    ]
    pairs = harness.group_judgments(judgments)
    metric = np.array([0.1, 0.5, 0.3, 0.9, 0.7, 0.2, 0.2, 0.6])
    human = pairs.human
    for name, reference in [
        ("flickr8k_expert", 100 * stats.kendalltau(metric, human, variant="c").statistic),
        ("flickr8k_cf", 100 * stats.kendalltau(metric, human, variant="b").statistic),
        ("thumb", 100 * stats.pearsonr(metric, human).statistic),
    ]:
        statistic = judgment_set(name).statistic
        report, comparisons = absolute_report(statistic, pairs, {"m": metric})
        assert next(iter(report["m"])) == statistic and comparisons == {}
        assert report["m"][statistic] == pytest.approx(reference, abs=1e-9)
    assert pairs.systems == [j.system for j in judgments]
    report, _ = absolute_report(judgment_set("thumb").statistic, pairs, {"m": metric})
    for name, reference in [
        ("tau_b", stats.kendalltau(metric, human, variant="b").statistic),
        ("spearman", stats.spearmanr(metric, human).statistic),
    ]:
        assert report["m"][name] == pytest.approx(100 * reference, abs=1e-9)
    means_m = [metric[[i for i in range(8) if i % 4 == s]].mean() for s in range(4)]
    means_h = [human[[i for i in range(8) if i % 4 == s]].mean() for s in range(4)]
    assert report["m"]["system_pearson"] == pytest.approx(
        100 * stats.pearsonr(means_m, means_h).statistic
    )


def test_pascal_accuracy_by_hand():
    judgments = [
        PairJudgment("i", "a0", "b0", tuple(f"r{k}" for k in range(8)), 0.75, "HC"),  # humans: a
        PairJudgment("i", "a1", "b1", ("r",), 0.25, "HC"),  # humans: b
        PairJudgment("i", "a2", "b2", ("r",), 0.5, "HI"),  # no majority: left out
        PairJudgment("i", "a3", "b3", ("r",), 1.0, "HI"),  # humans: a
    ]
    pairs = pairwise_sets.preference_pairs(judgments, num_references=5, seed=0)
    assert len(pairs.gts["0a"]) == 5 and pairs.gts["0a"] == pairs.gts["0b"]
    assert pairs.gts["0a"] == pairwise_sets.preference_pairs(judgments, 5, seed=0).gts["0a"]
    # metric per candidate, in a, b order: right, wrong, (ignored), tie
    scores = {"m": np.array([0.9, 0.1, 0.8, 0.2, 0.5, 0.5, 0.4, 0.4])}
    report = pairwise_sets.pascal_report(pairs, scores)[0]["m"]
    assert report == {"HC": 50.0, "HI": 50.0, "mean": 50.0}


def test_fixture_sets_each_get_their_statistic(tmp_path):
    thumb = tmp_path / "mscoco_THumB-1.0.jsonl"
    rows = []
    for image in ("974", "2453"):
        for k, (system, hyp, score) in enumerate(
            [("A", "people ride an elephant", 4.0), ("B", "a bench", 2.0), ("C", "a dog", 1.0)]
        ):
            rows.append(
                {"SYS": system, "seg_id": image, "hyp": hyp, "human_score": score + k * 0.1}
            )
    thumb.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "mscoco_references.json").write_text(
        "".join(
            json.dumps({"seg_id": s, "refs": r}) + "\n"
            for s, r in (
                ("974", ["A man and children ride an elephant."]),
                ("2453", ["A bench in water."]),
            )
        )
    )
    pascal = _write_pascal(tmp_path)
    result = _run(
        tmp_path,
        "--judgments",
        f"flickr8k_cf:{FIXTURES},thumb:{thumb},pascal50s:{pascal},"
        f"composite:{FIXTURES / 'composite_8k_correctness.csv'},flickr8k_expert:{FIXTURES}",
        "--references",
        f"composite={FIXTURES / 'Flickr8k.token.txt'}",
    )
    sets = result["sets"]
    assert result["model"] == "I2CE base, scorer 2"
    assert list(sets["flickr8k_cf"]["metrics"]["I2CE"])[:4] == [
        "tau_b",
        "tau_c",
        "spearman",
        "pearson",
    ]
    assert list(sets["thumb"]["metrics"]["I2CE"])[:6] == [
        "pearson",
        "tau_c",
        "tau_b",
        "spearman",
        "system_kendall_tau_b",
        "system_pearson",
    ]
    assert set(sets["pascal50s"]["metrics"]["CIDEr"]) <= {"HC", "HI", "HM", "MM", "mean"}
    assert "mean" in sets["pascal50s"]["metrics"]["I2CE"]
    assert next(iter(sets["composite"]["metrics"]["BLEU-4"])) == "tau_c"
    assert next(iter(sets["flickr8k_expert"]["metrics"]["I2CE"])) == "tau_c"
    # without --bootstrap: PERM-BOTH alone, no intervals
    thumb_pair = sets["thumb"]["comparisons"]["I2CE"]["CIDEr"]
    assert set(thumb_pair) == {"delta", "perm_both_p", "perm_both_resamples"}
    assert "bootstrap" not in result and result["perm_both"]["resamples"] == 1000
    assert set(sets["thumb"]["clusters"]) == {"perm_both"}
    assert "METEOR" in sets["thumb"]["skipped"]


def test_bad_arguments_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="NAME:PATH"):
        metaeval.parse_specs("expert:/x")
    with pytest.raises(DataFormatError, match="Composite files hold no references"):
        _run(tmp_path, "--judgments", f"composite:{FIXTURES / 'composite_8k_correctness.csv'}")
    with pytest.raises(DataFormatError, match="does not exist"):
        _run(tmp_path, "--judgments", f"flickr8k_expert:{tmp_path}")


def test_flickr8k_expert_real_file_matches_the_bench(tmp_path, shared_data):
    # The bench's I2CE rows were measured with scorer 1 (before word evidence, issue 69).
    judgments = f"flickr8k_expert:{shared_data / 'flickr8k'}"
    result = _run(tmp_path, "--judgments", judgments, "--scorer", "1")
    metrics = result["sets"]["flickr8k_expert"]["metrics"]
    bench = json.loads(BENCH_JSON.read_text())["tau_c"]
    assert metrics["I2CE"]["tau_c"] == pytest.approx(bench["I2CE-pretrained"], abs=0.05)
    assert metrics["BLEU-4"]["tau_c"] == pytest.approx(bench["BLEU-4"], abs=1e-6)
    assert metrics["CIDEr"]["tau_c"] == pytest.approx(bench["CIDEr"], abs=1e-6)


PLUGIN = '''
import numpy as np


class WordCount:
    """A caption metric of one's own: the candidate's length over its first reference's."""

    def compute_score(self, gts, res):
        scores = np.array([len(res[k][0].split()) / len(gts[k][0].split()) for k in res])
        return float(scores.mean()), scores


def make():
    return WordCount()


def nan_metric():
    class Broken:
        def compute_score(self, gts, res):
            return 0.0, [float("nan")] * len(res)

    return Broken()


def short_metric():
    class Short:
        def compute_score(self, gts, res):
            return 0.0, [1.0]

    return Short()
'''


def _expert_fixture_pairs() -> harness.JudgedPairs:
    judgments = load_set("flickr8k_expert", FIXTURES)
    return harness.group_judgments(judgments, judgment_set("flickr8k_expert").row_id)


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    (tmp_path / "my_metric.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "my_metric"


def test_a_plugged_metric_and_a_scores_file_join_the_builtins_with_intervals(tmp_path, plugin):
    """--metric and --scores sit beside the built-in metrics; --bootstrap gives every
    statistic its interval and every pair of metrics a paired test."""
    pairs = _expert_fixture_pairs()
    scores_file = tmp_path / "mine.json"
    scores_file.write_text(json.dumps({row: float(len(row)) for row in pairs.ids}))
    result = _run(
        tmp_path,
        "--judgments",
        f"flickr8k_expert:{FIXTURES}",
        "--metric",
        f"words={plugin}:WordCount",
        "--metric",
        f"made={plugin}:make",
        "--scores",
        f"given={scores_file}",
        "--metrics",
        "CIDEr,words,made,given",
        "--bootstrap",
        "50",
        "--seed",
        "3",
    )
    expert = result["sets"]["flickr8k_expert"]
    assert list(expert["metrics"]) == ["CIDEr", "words", "made", "given"]
    for values in expert["metrics"].values():
        for statistic in ("tau_c", "tau_b", "spearman", "pearson"):
            cell = values[statistic]
            assert set(cell) == {"value", "ci_low", "ci_high"}
    assert expert["metrics"]["words"] == expert["metrics"]["made"]  # the class, the function
    entry = expert["comparisons"]["words"]["made"]
    assert entry["delta"] == 0 and entry["p_value"] == 1 and entry["perm_both_p"] == 1
    assert set(expert["comparisons"]["given"]["CIDEr"]) == {
        "delta",
        "ci_low",
        "ci_high",
        "p_value",
        "p_value_williams",
        "perm_both_p",
        "perm_both_resamples",
    }
    assert result["bootstrap"] == {
        "resamples": 50,
        "seed": 3,
        "confidence": 0.95,
        "baseline": "CIDEr",
    }
    again = _run(
        tmp_path,
        "--judgments",
        f"flickr8k_expert:{FIXTURES}",
        "--metric",
        f"words={plugin}:WordCount",
        "--metrics",
        "CIDEr,words",
        "--bootstrap",
        "50",
        "--seed",
        "3",
    )
    assert again["sets"]["flickr8k_expert"]["metrics"]["words"] == expert["metrics"]["words"]


@pytest.mark.parametrize(
    "args, error",
    [
        (["--metric", "x=no_such_module_here:Thing"], "metric 'x': module 'no_such_module_here'"),
        (["--metric", "x=my_metric:Missing"], "metric 'x': module 'my_metric' has no 'Missing'"),
        (["--metric", "x=my_metric"], "metric 'x': expected MODULE:ATTR"),
        (["--metric", "x=my_metric:nan_metric"], "metric 'x' on flickr8k_expert: row '"),
        (["--metric", "x=my_metric:short_metric"], "metric 'x' on flickr8k_expert: 1 scores"),
        (["--metric", "BLEU-4=my_metric:make"], "taken"),
        (["--metrics", "CIDEr,nope"], "--metrics: unknown"),
        (["--metrics", "CIDEr", "--baseline", "BLEU-1"], "--baseline 'BLEU-1'"),
    ],
)
def test_bad_metrics_are_clear_errors(tmp_path, plugin, args, error):
    with pytest.raises(ValueError, match=error):
        _run(tmp_path, "--judgments", f"flickr8k_expert:{FIXTURES}", *args)


def test_bad_score_files_name_the_metric_set_and_row(tmp_path):
    path = tmp_path / "given.json"
    base = ["--judgments", f"flickr8k_expert:{FIXTURES}", "--metrics", "BLEU-1,given"]
    path.write_text(json.dumps({"nobody": 1.0}))
    with pytest.raises(ValueError, match="metric 'given' on flickr8k_expert: no score for row"):
        _run(tmp_path, *base, "--scores", f"given={path}")
    pairs = _expert_fixture_pairs()
    first = pairs.ids[0]
    path.write_text(json.dumps({row: ("high" if row == first else 1.0) for row in pairs.ids}))
    with pytest.raises(ValueError, match=f"row '{first}' scored 'high', not a number"):
        _run(tmp_path, *base, "--scores", f"given={path}")
    path.write_text("[1, 2]")
    with pytest.raises(DataFormatError, match=r"given\.json: --scores given: expected a JSON"):
        _run(tmp_path, *base, "--scores", f"given={path}")
