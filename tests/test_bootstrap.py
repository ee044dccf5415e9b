"""Bootstrap intervals and paired tests (capsim.metrics.bootstrap) against NumPy loops and
against the metrics recomputed on resampled caption sets."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from capsim.metrics import bootstrap
from capsim.metrics.bleu import Bleu
from capsim.metrics.bootstrap import bleu_rows, mean_rows, meteor_rows
from capsim.metrics.meteor import Meteor, MeteorResourceError

GTS = {
    f"img{k}": refs
    for k, refs in enumerate(
        [
            ["a dog runs on the grass", "a brown dog running in a field"],
            ["two men play chess in a park", "men playing a board game outside"],
            ["a red car parked by the road", "a car on the side of a street"],
            ["a child eats an ice cream", "a little girl with an ice cream cone"],
            ["a cat sleeps on a sofa", "a cat lying on the couch"],
            ["people walk along the beach", "a group of people on a sandy beach"],
        ]
    )
}
SYSTEM_A = {
    "img0": ["a dog runs in the grass"],
    "img1": ["two men play a game"],
    "img2": ["a red car on the road"],
    "img3": ["a girl eats ice cream"],
    "img4": ["a cat on a sofa"],
    "img5": ["people on the beach"],
}
SYSTEM_B = {key: ["a picture of something"] for key in GTS}


def _numpy_reference_draws(count: int, resamples: int, seed: int):
    """The resamples and swap masks bootstrap draws, in its order, as index arrays (the swaps
    as booleans: capsim.metrics.resampling draws PERM-BOTH's and these alike)."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, count, size=(resamples, count))
    return draws, rng.integers(0, 2, (resamples, count), dtype=bool)


def test_mean_metric_intervals_equal_a_numpy_loop():
    scores = np.array([0.1, 0.9, 0.4, 0.4, 0.75, 0.2, 0.05])
    report = bootstrap.bootstrap({"s": [mean_rows("X", scores)]}, resamples=300, seed=3)
    draws, _ = _numpy_reference_draws(len(scores), 300, 3)
    means = np.array([scores[d].mean() for d in draws])
    got = report["systems"]["s"]["X"]
    assert got["score"] == pytest.approx(scores.mean())
    assert got["ci_low"] == pytest.approx(np.percentile(means, 2.5))
    assert got["ci_high"] == pytest.approx(np.percentile(means, 97.5))
    assert got["ci_low"] < got["score"] < got["ci_high"]


def test_paired_p_values_equal_numpy_loops():
    a = np.array([0.3, 0.6, 0.5, 0.9, 0.2, 0.4, 0.7, 0.1])
    b = a + np.array([0.1, -0.05, 0.2, 0.0, 0.15, -0.1, 0.05, 0.1])
    report = bootstrap.bootstrap(
        {"a": [mean_rows("X", a)], "b": [mean_rows("X", b)]}, resamples=500, seed=1
    )
    draws, swaps = _numpy_reference_draws(len(a), 500, 1)
    delta = b.mean() - a.mean()
    differences = np.array([b[d].mean() - a[d].mean() for d in draws])
    centred = np.abs(differences - differences.mean())
    swapped = np.array(
        [np.where(s == 1, a, b).mean() - np.where(s == 1, b, a).mean() for s in swaps]
    )
    test = report["comparisons"]["b"]["X"]
    as_far = abs(delta) - 1e-12  # swapping an image where a == b gives delta again
    assert test["delta"] == pytest.approx(delta)
    assert test["p_value"] == pytest.approx(((centred >= as_far).sum() + 1) / 501)
    assert test["p_value_randomization"] == pytest.approx(
        ((np.abs(swapped) >= as_far).sum() + 1) / 501
    )


def test_identical_systems_are_never_significant_and_a_clear_gain_is():
    rng = np.random.default_rng(0)
    a = rng.uniform(0, 1, 200)
    same = bootstrap.bootstrap({"a": [mean_rows("X", a)], "b": [mean_rows("X", a)]}, 200)
    assert same["comparisons"]["b"]["X"] == {
        "delta": 0.0,
        "p_value": 1.0,
        "p_value_randomization": 1.0,
    }
    better = bootstrap.bootstrap({"a": [mean_rows("X", a)], "b": [mean_rows("X", a + 0.2)]}, 200)
    assert better["comparisons"]["b"]["X"]["p_value"] == pytest.approx(1 / 201)
    assert better["comparisons"]["b"]["X"]["p_value_randomization"] == pytest.approx(1 / 201)


def _resampled(captions: dict, draw: np.ndarray) -> dict:
    keys = list(captions)
    return {f"{n}:{keys[i]}": captions[keys[i]] for n, i in enumerate(draw)}


def test_bleu_of_each_resample_is_bleu_recomputed_on_the_resampled_captions():
    rows = bleu_rows(Bleu(4).statistics(GTS, SYSTEM_A))
    draws, _ = _numpy_reference_draws(len(GTS), 5, 0)
    weights = np.stack([np.bincount(d, minlength=len(GTS)) for d in draws]).astype(float)
    per_resample = rows.score(weights @ rows.rows, len(GTS))
    for draw, got in zip(draws, per_resample, strict=True):
        expected, _ = Bleu(4).compute_score(_resampled(GTS, draw), _resampled(SYSTEM_A, draw))
        np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_meteor_of_each_resample_is_meteor_recomputed_on_the_resampled_captions():
    try:
        meteor = Meteor()
    except MeteorResourceError as error:
        pytest.skip(str(error))
    rows = meteor_rows(meteor.statistics(GTS, SYSTEM_A))
    draws, _ = _numpy_reference_draws(len(GTS), 5, 0)
    for draw in draws:
        weights = np.bincount(draw, minlength=len(GTS)).astype(float)[None]
        expected, _ = meteor.compute_score(_resampled(GTS, draw), _resampled(SYSTEM_A, draw))
        assert rows.score(weights @ rows.rows, len(GTS))[0, 0] == pytest.approx(expected, abs=1e-12)


def test_the_same_seed_gives_the_same_report_and_another_seed_other_intervals():
    systems = {
        "a": [bleu_rows(Bleu(4).statistics(GTS, SYSTEM_A))],
        "b": [bleu_rows(Bleu(4).statistics(GTS, SYSTEM_B))],
    }
    first = bootstrap.bootstrap(systems, resamples=100, seed=7)
    assert json.dumps(first) == json.dumps(bootstrap.bootstrap(systems, resamples=100, seed=7))
    other = bootstrap.bootstrap(systems, resamples=100, seed=8)
    assert other["systems"]["a"]["Bleu_1"]["score"] == first["systems"]["a"]["Bleu_1"]["score"]
    assert other["systems"]["a"]["Bleu_1"]["ci_low"] != first["systems"]["a"]["Bleu_1"]["ci_low"]
    assert first["comparisons"]["b"]["Bleu_1"]["delta"] < 0
    assert "b against a (paired)" in bootstrap.format_report(first)


@pytest.mark.parametrize(
    ("systems", "kwargs", "message"),
    [
        ({"a": [mean_rows("X", [1.0, 2.0])], "b": [mean_rows("X", [1.0])]}, {}, "same images"),
        ({"a": [mean_rows("X", [1.0, 2.0])]}, {"resamples": 0}, "resamples"),
        ({"a": [mean_rows("X", [1.0, 2.0])]}, {"confidence": 1.5}, "confidence"),
        ({}, {}, "at least one system"),
    ],
)
def test_bad_settings_are_refused(systems, kwargs, message):
    with pytest.raises(ValueError, match=message):
        bootstrap.bootstrap(systems, **kwargs)


def test_p_values_are_roughly_uniform_under_a_null_and_a_planted_difference_is_found():
    """200 seeded pairs of systems that differ by per-image noise only, then the same with
    0.08 added to the second: under the null about 5% of p-values fall below 0.05 and
    their distribution passes a Kolmogorov-Smirnov test for uniform; the planted
    difference (about 4 standard errors) is found nearly every time."""
    rng = np.random.default_rng(0)
    null = {"p_value": [], "p_value_randomization": []}
    found = 0
    for trial in range(200):
        truth = rng.uniform(0, 1, 60)
        a, b = truth + rng.normal(0, 0.1, (2, 60))
        report = bootstrap.bootstrap(
            {"a": [mean_rows("X", a)], "b": [mean_rows("X", b)]}, resamples=200, seed=trial
        )
        for key in null:
            null[key].append(report["comparisons"]["b"]["X"][key])
        planted = bootstrap.bootstrap(
            {"a": [mean_rows("X", a)], "b": [mean_rows("X", b + 0.08)]}, resamples=200, seed=trial
        )
        found += planted["comparisons"]["b"]["X"]["p_value"] < 0.05
    for key, p_values in null.items():
        p_values = np.asarray(p_values)
        assert 0.01 <= np.mean(p_values < 0.05) <= 0.12, key
        assert stats.kstest(p_values, "uniform").pvalue > 0.01, key
    assert found >= 190
