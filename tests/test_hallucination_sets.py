"""The hallucination sets as judgment sets: FOIL-nocaps (better-worse pairs, per domain) and
HAT (one label a caption: AUROC and average precision), read as the ALOHa authors ship
them, their statistics against a NumPy re-derivation, and bad rows named."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from capsim.data import judgment_files as files
from capsim.errors import DataFormatError
from capsim.eval import judgment_harness as harness
from capsim.eval import label_sets
from capsim.eval.judgment_sets import load_set

HALLUCINATION = Path("hallucination")


def write_foil_nocaps(path: Path, rows: int = 12) -> Path:
    """FOIL-nocaps in ALOHa's layout: a JSON list, one image a row, 9 references, the
    baseline caption and its foil (one object word swapped), in-domain or near-domain."""
    objects = ["shirt", "dog", "car", "tree", "boat", "cake"]
    data = []
    for i in range(rows):
        old, new = objects[i % 6], objects[(i + 1) % 6]
        data.append(
            {
                "image_path": f"{i:016x}.jpg",
                "references": [f"a person with a {old} number {k} " for k in range(9)],
                "baseline": f"A person with a {old}. ",
                "foil": f"A person with a {new}. ",
                "replacement": [old, new],
                "domain": "in-domain" if i % 3 == 0 else "near-domain",
            }
        )
    path.write_text(json.dumps(data, indent=1))
    return path


def write_hat(path: Path, rows: int = 24) -> Path:
    """HAT in ALOHa's layout: a JSON list of machine captions, two an image, 5 references,
    ``contains_hallucination`` a JSON boolean (every third caption)."""
    data = [
        {
            "sample_id": f"id-{i}",
            "caption": f"A photo of thing {i}.",
            "grounding": [["A", False]],
            "contains_hallucination": i % 3 == 0,
            "image_path": f"COCO_val2014_{i // 2:012d}.jpg",
            "session_id": "s",
            "references": [f"a reference {k} of image {i // 2}" for k in range(5)],
            "is_gold": False,
            "is_positive": i % 3 == 0,
            "is_machine_generated": True,
        }
        for i in range(rows)
    ]
    path.write_text(json.dumps(data, indent=1))
    return path


# --------------------------------------------------------------------------- statistics


def _auroc_by_pairs(scores, flawed, counts) -> float:
    """Every (clean, flawed) pair, each row repeated ``counts`` times: 1 when the clean
    caption scores higher, ½ for a tie."""
    clean = [s for s, f, c in zip(scores, flawed, counts, strict=True) for _ in range(c) if not f]
    bad = [s for s, f, c in zip(scores, flawed, counts, strict=True) for _ in range(c) if f]
    wins = sum((c > b) + 0.5 * (c == b) for c in clean for b in bad)
    return wins / (len(clean) * len(bad))


def _ap_by_thresholds(scores, flawed, counts) -> float:
    """sklearn's average precision with positives = flawed ranked by -score: at each distinct
    score, from the lowest, the precision of every caption at or below it, weighted by the
    flawed captions it adds."""
    scores, flawed = np.repeat(scores, counts), np.repeat(flawed, counts)
    total, ap = flawed.sum(), 0.0
    for threshold in np.unique(scores):
        taken = scores <= threshold
        added = (flawed & (scores == threshold)).sum()
        ap += added / total * (flawed & taken).sum() / taken.sum()
    return ap


def test_auroc_and_average_precision_against_a_rederivation_with_ties():
    scores = np.array([0.9, 0.1, 0.5, 0.5, 0.3, 0.5, 0.8, 0.1, 0.7, 0.3])
    flawed = np.array([0, 1, 1, 0, 1, 0, 0, 0, 1, 1], bool)
    rng = np.random.default_rng(0)
    counts = np.vstack([np.ones(10, int), rng.integers(0, 3, (20, 10))])
    counts[1:, 0] = counts[1:, 1] = 1  # each resample keeps a clean and a flawed caption
    got = label_sets.label_statistics(scores, flawed, counts)
    for line, row in zip(counts, got, strict=True):
        assert row[0] == pytest.approx(_auroc_by_pairs(scores, flawed, line))
        assert row[1] == pytest.approx(_ap_by_thresholds(scores, flawed, line))
        assert row[2] == pytest.approx((line * flawed).sum() / line.sum())
    # by hand: ranked by score, flawed at 0.1 (with a clean), 0.3 (two), 0.5 (one of three)
    # and 0.7: AP = 1/5 (1/2) + 2/5 (3/4) + 1/5 (4/7) + 1/5 (5/8)
    assert got[0, 1] == pytest.approx((1 / 2 + 2 * 3 / 4 + 4 / 7 + 5 / 8) / 5)
    # PERM-BOTH's AUROC (ranks over [resamples, captions]) is the report's
    captions = label_sets.LabelledCaptions({}, {}, flawed, np.arange(10), [])
    _, _, auroc = label_sets.label_rows(captions, {"m": scores})
    assert auroc(np.vstack([scores, -scores])) == pytest.approx([got[0, 0], 1 - got[0, 0]])


def test_a_resample_without_flawed_captions_is_undefined_not_a_number():
    got = label_sets.label_statistics(np.array([1.0, 2.0]), np.array([False, True]), [1, 0])
    assert np.isnan(got[0, :2]).all() and got[0, 2] == 0


# --------------------------------------------------------------------------- the sets


def _length(gts, res):
    """A stand-in metric: the caption's length."""
    scores = np.array([float(len(res[k][0])) for k in res])
    return float(scores.mean()), scores


def test_hat_reads_one_label_a_caption_and_reports_auroc_and_average_precision(tmp_path):
    path = write_hat(tmp_path / "hat.json")
    judgments = load_set("hat", path)
    assert len(judgments) == 24 and sum(j.flawed for j in judgments) == 8
    assert judgments[3].candidate_id == "3" and len(judgments[3].references) == 5
    scored = harness.score_set("hat", judgments, {"length": _length}, builtin=("BLEU-1",))
    report, comparisons = harness.set_report(scored, resamples=50, seed=1)
    metric = scored.scores["length"]
    flawed = np.array([j.flawed for j in judgments])
    ones = np.ones(24, int)
    values = report["length"]
    assert list(values) == ["auroc", "average_precision", "chance_average_precision"]
    assert values["auroc"]["value"] == pytest.approx(100 * _auroc_by_pairs(metric, flawed, ones))
    assert values["average_precision"]["value"] == pytest.approx(
        100 * _ap_by_thresholds(metric, flawed, ones)
    )
    assert values["chance_average_precision"]["value"] == pytest.approx(100 / 3)
    assert values["auroc"]["ci_low"] <= values["auroc"]["value"] <= values["auroc"]["ci_high"]
    entry = comparisons["length"]["BLEU-1"]
    delta = values["auroc"]["value"] - report["BLEU-1"]["auroc"]["value"]
    assert entry["delta"] == pytest.approx(delta) and 0 < entry["p_value"] <= 1


def test_foil_nocaps_is_baseline_over_foil_with_a_row_a_domain(tmp_path):
    path = write_foil_nocaps(tmp_path / "foil.json")
    judgments = load_set("foil_nocaps", path)
    assert [j.category for j in judgments[:3]] == ["in-domain", "near-domain", "near-domain"]
    first = judgments[0]
    assert (first.candidate_a, first.candidate_b) == (
        "A person with a shirt. ",
        "A person with a dog. ",
    )
    assert len(first.references) == 9 and first.preference == 1.0
    scored = harness.score_set("foil_nocaps", judgments, builtin=("BLEU-1",))
    report, _ = harness.set_report(scored)
    assert list(report["BLEU-1"]) == ["accuracy", "in-domain", "near-domain"]
    assert report["BLEU-1"]["accuracy"] == 100.0  # the baseline's object is in every reference


def _rows(path: Path, rows: list) -> Path:
    path.write_text(json.dumps(rows))
    return path


HAT_ROW = {"caption": "a dog", "references": ["a dog runs"], "image_path": "x.jpg"}
FOIL_ROW = {
    "image_path": "x.jpg",
    "references": ["a dog runs"],
    "baseline": "a dog",
    "foil": "a cat",
    "domain": "in-domain",
}


@pytest.mark.parametrize(
    "row, message",
    [
        (HAT_ROW, "row 1: no contains_hallucination label"),
        (
            {**HAT_ROW, "contains_hallucination": "yes"},
            "row 1: contains_hallucination 'yes' is not",
        ),
        ({**HAT_ROW, "contains_hallucination": 1}, "row 1: contains_hallucination 1 is not"),
        ({**HAT_ROW, "contains_hallucination": True, "caption": " "}, "row 1: caption must be"),
        ({**HAT_ROW, "contains_hallucination": True, "references": []}, "row 1: references"),
        ({"contains_hallucination": True, "caption": "a dog"}, "row 1: references"),
    ],
)
def test_a_bad_hat_row_is_one_line_naming_file_and_row(tmp_path, row, message):
    good = {**HAT_ROW, "contains_hallucination": False}
    path = _rows(tmp_path / "hat.json", [good, row])
    with pytest.raises(DataFormatError) as error:
        load_set("hat", path)
    assert str(error.value).startswith(f"{path}: {message}") and "\n" not in str(error.value)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"baseline": None}, "row 1: baseline must be a non-empty caption"),
        ({"foil": None}, "row 1: foil must be a non-empty caption"),
        ({"baseline": "  "}, "row 1: baseline must be a non-empty caption"),
        ({"foil": ""}, "row 1: foil must be a non-empty caption"),
        ({"references": ["a dog", ""]}, "row 1: references"),
        ({"domain": None}, "row 1: domain"),
    ],
)
def test_a_bad_foil_nocaps_row_is_one_line_naming_file_and_row(tmp_path, change, message):
    row = {k: v for k, v in {**FOIL_ROW, **change}.items() if v is not None}
    path = _rows(tmp_path / "foil.json", [FOIL_ROW, row])
    with pytest.raises(DataFormatError) as error:
        load_set("foil_nocaps", path)
    assert str(error.value).startswith(f"{path}: {message}") and "\n" not in str(error.value)


def test_the_real_files_read(shared_data):
    folder = shared_data / HALLUCINATION
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent")
    foil = files.read_foil_nocaps(folder / "foil_nocaps_dev.json")
    assert len(foil) == 1739 and {j.category for j in foil} == {"in-domain", "near-domain"}
    assert sum(j.category == "in-domain" for j in foil) == 245
    assert all(len(j.references) in (8, 9) and j.candidate_a != j.candidate_b for j in foil)
    assert sum(len(j.references) == 9 for j in foil) == 1736  # 3 rows ship 8
    hat = files.read_hat(folder / "hat_trainval.json")
    assert len(hat) == 400 and sum(j.flawed for j in hat) == 135
    assert all(len(j.references) >= 5 for j in hat)
    assert len({j.image_id for j in hat}) == 385
