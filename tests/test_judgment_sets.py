"""capsim.eval.judgment_sets: every registry entry is complete, and reads and scores its fixture."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from test_hallucination_sets import write_foil_nocaps, write_hat
from test_judgment_files import WORDS, write_caption_pairs, write_judgment_csv
from test_judgments import _write_pascal

from capsim import metaeval
from capsim.data.judgments import Judgment, LabelJudgment, PairJudgment, read_nebula
from capsim.errors import DataFormatError
from capsim.eval import judgment_harness as harness
from capsim.eval import judgment_kinds as kinds
from capsim.eval.absolute_sets import STATISTICS
from capsim.eval.evaluators.base import Subject
from capsim.eval.evaluators.judgments import Judgments
from capsim.eval.judgment_kinds import JudgmentKind
from capsim.eval.judgment_sets import (
    JUDGMENT_SETS,
    JudgmentSet,
    judgment_set,
    load_set,
    published_sets,
)

FIXTURES = Path(__file__).parent / "fixtures" / "judgments"
PUBLISHED_SETS = published_sets()
RECORD = {
    kinds.ABSOLUTE: Judgment,
    kinds.VOTED_PAIRS: PairJudgment,
    kinds.BETTER_WORSE: PairJudgment,
    kinds.CAPTION_LABELS: LabelJudgment,
}


def _write_nebula(tmp_path: Path, rows: int = 40, seed: int = 0) -> Path:
    """A file in Nebula's format: a JSON array of {imgid, mt, refs, score}; row 3's
    candidate is one of its own references, as 15 of Nebula's are."""
    rng = np.random.default_rng(seed)

    def caption() -> str:
        return " ".join(rng.choice(WORDS, size=int(rng.integers(3, 9))))

    data = []
    for i in range(rows):
        refs = [caption() for _ in range(int(rng.integers(5, 11)))]
        data.append(
            {
                "imgid": f"COCO_val2014_{i // 2:012d}.jpg",
                "mt": refs[1] if i == 3 else caption(),
                "refs": refs,
                "score": float(rng.integers(0, 5)) / 4,
            }
        )
    path = tmp_path / "nebula_test.json"
    path.write_text(json.dumps(data))
    return path


def _fixture(name: str, tmp_path: Path) -> tuple[Path, Path | None]:
    """(path, references) of a small copy of each published set, in its authors' layout."""
    fixtures = {
        "flickr8k_expert": (FIXTURES, None),
        "flickr8k_cf": (FIXTURES, None),
        "thumb": (FIXTURES / "mscoco_THumB-1.0.jsonl", None),
        "pascal50s": (_write_pascal(tmp_path), None),
        "composite": (FIXTURES / "composite_8k_correctness.csv", FIXTURES / "Flickr8k.token.txt"),
        "nebula": (_write_nebula(tmp_path), None),
        "pairs": (write_caption_pairs(tmp_path / "pairs.jsonl"), None),
        "csv": (write_judgment_csv(tmp_path / "set.csv"), None),
        "foil_nocaps": (write_foil_nocaps(tmp_path / "foil_nocaps.json"), None),
        "hat": (write_hat(tmp_path / "hat.json"), None),
    }
    assert set(fixtures) == set(PUBLISHED_SETS), "each published set needs a fixture here"
    return fixtures[name]


def _length_score(gts, res):
    """A stand-in caption scorer: cheap, deterministic, not constant."""
    scores = np.array([len(res[k][0]) / (1.0 + len(gts[k])) for k in res])
    return float(scores.mean()), scores


@pytest.mark.parametrize("name", list(JUDGMENT_SETS))
def test_every_entry_is_complete(name):
    entry = JUDGMENT_SETS[name]
    assert isinstance(entry, JudgmentSet) and entry.name == name
    assert isinstance(entry.path, str) and entry.path
    assert entry.read is None or callable(entry.read)
    assert isinstance(entry.kind, JudgmentKind)
    if entry.kind is kinds.ABSOLUTE:
        assert entry.statistic in STATISTICS
    else:
        # pascal_report's mean accuracy over categories; a pair set's share of pairs; the
        # labelled captions' AUROC
        assert (
            entry.statistic
            == {
                kinds.VOTED_PAIRS: "mean",
                kinds.BETTER_WORSE: "accuracy",
                kinds.CAPTION_LABELS: "auroc",
            }[entry.kind]
        )
    assert (name in PUBLISHED_SETS) == (entry.read is not None)


@pytest.mark.parametrize("name", PUBLISHED_SETS)
def test_each_published_set_reads_and_reports_its_statistic(name, tmp_path):
    entry = judgment_set(name)
    path, references = _fixture(name, tmp_path)
    judgments = load_set(name, path, references)
    assert judgments and all(isinstance(j, RECORD[entry.kind]) for j in judgments)
    report, _ = harness.evaluate_judgments(name, judgments, _length_score, include_meteor=False)
    assert all(entry.statistic in values for values in report.values())
    flat = Judgments(name, str(path), str(references or ""))(Subject(compute_score=_length_score))
    assert flat["I2CE"] == report["I2CE"][entry.statistic]


def test_unknown_set_is_a_clear_error_listing_the_known_ones(tmp_path):
    for make in (
        lambda: judgment_set("expert"),
        lambda: load_set("expert", tmp_path),
        lambda: Judgments("expert"),
        lambda: harness.evaluate_judgments("expert", [], _length_score, include_meteor=False),
    ):
        with pytest.raises(ValueError, match="unknown judgment set 'expert'") as error:
            make()
        assert all(name in str(error.value) for name in JUDGMENT_SETS)


def test_sets_built_in_process_are_not_loaded_from_files(tmp_path):
    with pytest.raises(ValueError, match="not read from files"):
        load_set("shapes_world", tmp_path)
    with pytest.raises(ValueError, match="NAME:PATH"):
        metaeval.parse_specs(f"shapes_world:{tmp_path}")
    assert (
        Judgments("shapes_world")(Subject(compute_score=_length_score)) is None
    )  # no world in this run


def test_cli_help_lists_every_published_set_with_its_path_and_statistic():
    text = metaeval.sets_help()
    for name in PUBLISHED_SETS:
        entry = JUDGMENT_SETS[name]
        line = next(line for line in text.splitlines() if line.split()[:1] == [name])
        assert entry.path in line and line.endswith(entry.statistic)


def test_nebula_is_kendall_tau_c_over_all_rows_self_references_kept(tmp_path):
    path = _write_nebula(tmp_path)
    judgments = load_set("nebula", path)
    assert len(judgments) == 40
    assert judgments[3].candidate in judgments[3].references  # kept, as published
    assert [j.candidate_id for j in judgments] == [str(i) for i in range(40)]
    report, _ = harness.evaluate_judgments("nebula", judgments, _length_score, False)
    pairs = harness.group_judgments(judgments)
    assert len(pairs.keys) == 40  # one row each, none merged
    metric = _length_score(pairs.gts, pairs.res)[1]
    human = np.array([j.score for j in judgments])
    expected = 100 * stats.kendalltau(metric, human, variant="c").statistic
    assert report["I2CE"]["tau_c"] == pytest.approx(expected)
    lines = tmp_path / "nebula.jsonl"  # JSON lines read the same
    lines.write_text("".join(json.dumps(row) + "\n" for row in json.loads(path.read_text())))
    assert read_nebula(lines) == judgments


@pytest.mark.parametrize(
    "row, message",
    [
        ({"imgid": "x", "mt": "a dog", "refs": ["a dog"], "score": 1.5}, "row 1: score"),
        ({"imgid": "x", "mt": "a dog", "refs": [], "score": 0.5}, "row 1: refs"),
        ({"imgid": "x", "refs": ["a dog"], "score": 0.5}, "row 1: mt"),
        ({"mt": "a dog", "refs": ["a dog"], "score": 0.5}, "row 1: imgid"),
        ({"imgid": "x", "mt": "a dog", "refs": ["a dog"], "score": "high"}, "row 1: score"),
    ],
)
def test_nebula_bad_rows_are_named(tmp_path, row, message):
    good = {"imgid": 1, "mt": "a cat", "refs": ["a cat sits"], "score": 0.25}
    path = tmp_path / "nebula.json"
    path.write_text(json.dumps([good, row]))
    with pytest.raises(DataFormatError, match=f"nebula.json: {message}"):
        read_nebula(path)
    path.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(DataFormatError, match=f"nebula.json:2: {message}"):
        read_nebula(path)
