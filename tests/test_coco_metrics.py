"""The COCO metric bundle: METEOR in Python (the jar as its oracle), clear reasons when not."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from capsim.errors import CaptionError
from capsim.metrics import coco_metrics
from capsim.metrics.coco_metrics import (
    MetricUnavailable,
    compute_caption_metrics,
    compute_meteor,
    compute_ngram_metrics,
    meteor_available,
    spice_unavailable_reason,
)
from capsim.metrics.meteor import MeteorResourceError, resources

GOLDEN_FILE = "golden/pycocoevalcap_flickr8k_expert.json"
METEOR_ROWS = slice(0, None, 283)  # 20 rows spread over the whole file
# Scored in a batch of 20 instead of 5,664, METEOR 1.5 reproduced the golden
# values exactly here; 1e-4 leaves room for JVM and platform float differences.
METEOR_TOLERANCE = 1e-4
NGRAM_METRICS = {"BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "ROUGE-L", "CIDEr"}
GTS = {"a": ["a dog runs on the grass", "a brown dog is running"], "b": ["a cat sleeps"]}
RES = {"a": ["a dog runs"], "b": ["the cat is asleep"]}

requires_meteor = pytest.mark.skipif(
    not meteor_available(),
    reason=f"METEOR's data files come with pycocoevalcap: {resources.INSTALL_HINT}",
)
requires_jar = pytest.mark.skipif(
    not meteor_available("jar"),
    reason=f"the jar needs Java on PATH and {resources.INSTALL_HINT}",
)


@pytest.fixture
def without_java(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name, *args, **kwargs: None)


@pytest.fixture
def without_meteor_files(monkeypatch):
    def missing():
        raise MeteorResourceError(
            f"METEOR needs pycocoevalcap's data files: {resources.INSTALL_HINT}"
        )

    monkeypatch.setattr(resources, "locate_files", missing)


def test_python_meteor_needs_no_java(without_java):
    assert not meteor_available("jar")
    with pytest.raises(MetricUnavailable, match=r"missing: Java \('java' is not on PATH"):
        compute_meteor(GTS, RES, engine="jar")
    if meteor_available():
        scores, skipped = compute_caption_metrics(GTS, RES)
        assert "METEOR" not in skipped and scores["METEOR"].shape == (2,)


def test_caption_metrics_report_skipped_meteor_and_spice(without_meteor_files):
    assert not meteor_available()
    scores, skipped = compute_caption_metrics(GTS, RES)
    assert set(scores) == NGRAM_METRICS
    expected = compute_ngram_metrics(GTS, RES)
    for name in NGRAM_METRICS:
        np.testing.assert_array_equal(scores[name], expected[name])
    assert skipped["METEOR"].startswith("METEOR needs pycocoevalcap's data files: pip install")
    assert skipped["SPICE"] == spice_unavailable_reason()
    assert "CoreNLP" in skipped["SPICE"]


def test_unknown_meteor_engine_is_an_error():
    with pytest.raises(ValueError, match="unknown METEOR engine 'perl'"):
        compute_meteor(GTS, RES, engine="perl")


def test_meteor_can_be_left_out_on_request(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("METEOR must not run when it was not requested")

    monkeypatch.setattr(coco_metrics, "compute_meteor", fail)
    scores, skipped = compute_caption_metrics(GTS, RES, include_meteor=False)
    assert set(scores) == NGRAM_METRICS
    assert skipped["METEOR"] == "not requested (include_meteor=False)"


def test_bad_inputs_fail_before_any_metric_runs(without_java):
    with pytest.raises(CaptionError, match="caption 'c': no references"):
        compute_caption_metrics(GTS, {"c": ["a dog"]})


@requires_meteor
@pytest.mark.parametrize("engine", ["python", "jar"])
def test_meteor_rejects_captions_that_break_its_line_protocol(engine):
    with pytest.raises(CaptionError, match=r"caption 'b'.*'\|\|\|'"):
        compute_meteor(GTS, {"a": ["a dog"], "b": ["a ||| cat"]}, engine=engine)


def golden_rows(shared_data) -> tuple[dict, dict, np.ndarray]:
    rows = json.loads((shared_data / GOLDEN_FILE).read_text())["rows"][METEOR_ROWS]
    gts = {row["key"]: row["references"] for row in rows}
    res = {row["key"]: [row["candidate"]] for row in rows}
    return gts, res, np.array([row["METEOR"] for row in rows])


@requires_meteor
def test_caption_metrics_meteor_is_python_and_matches_golden_values(shared_data, without_java):
    gts, res, expected = golden_rows(shared_data)
    scores, skipped = compute_caption_metrics(gts, res)
    assert "METEOR" not in skipped
    np.testing.assert_allclose(scores["METEOR"], expected, rtol=0, atol=METEOR_TOLERANCE)


@requires_jar
def test_jar_meteor_matches_golden_values(shared_data):
    gts, res, expected = golden_rows(shared_data)
    scores = compute_meteor(gts, res, engine="jar")
    np.testing.assert_allclose(scores, expected, rtol=0, atol=METEOR_TOLERANCE)
