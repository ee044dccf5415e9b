"""The judgment files metric papers distribute (capsim.data.judgment_files, pascal50S.mat):
read as shipped, recognised by the registry, malformed rows refused by file and row; and
the generic pair set's statistic against NumPy."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.io
from test_judgments import PASCAL_PAIRS, _write_pascal

from capsim.data import judgment_files as files
from capsim.data.pascal50s import read_pascal50s
from capsim.errors import DataFormatError
from capsim.eval import judgment_harness as harness
from capsim.eval import pairwise_sets
from capsim.eval.judgment_sets import load_set, pascal50s_labels
from capsim.metrics import resampling

WORDS = [
    "a",
    "dog",
    "cat",
    "man",
    "woman",
    "runs",
    "sits",
    "on",
    "the",
    "grass",
    "beach",
    "red",
    "ball",
    "with",
]


def write_caption_pairs(path: Path, pairs: int = 30, seed: int = 0, lines: bool = True) -> Path:
    """A pairwise set: better = a reference with one word changed, worse = random words;
    two categories, two pairs an image."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(pairs):
        references = [" ".join(rng.choice(WORDS, 8)) for _ in range(3)]
        better = references[0].split()
        better[0] = "the"
        rows.append(
            {
                "id": f"p{i}",
                "image": f"img{i // 2}",
                "category": "long" if i % 2 else "short",
                "references": references,
                "better": " ".join(better),
                "worse": " ".join(rng.choice(WORDS, 8)),
            }
        )
    text = "\n".join(map(json.dumps, rows)) if lines else json.dumps(rows)
    path.write_text(text)
    return path


def write_judgment_csv(path: Path, rows: int = 30, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    lines = ["mt,refs,score,imgid"]
    for i in range(rows):
        refs = [" ".join(rng.choice(WORDS, 6)) for _ in range(3)]
        lines.append(
            f'"{" ".join(rng.choice(WORDS, 6))}","{refs!r}",{rng.random():.3f},img{i // 3}'
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def test_caption_pairs_read_from_json_lines_and_a_json_list(tmp_path):
    as_lines = files.read_caption_pairs(write_caption_pairs(tmp_path / "a.jsonl"))
    as_list = files.read_caption_pairs(write_caption_pairs(tmp_path / "b.json", lines=False))
    assert as_lines == as_list and len(as_lines) == 30
    first = as_lines[0]
    assert (first.image_id, first.category, first.preference) == ("img0", "short", 1.0)
    assert first.candidate_a.startswith("the ") and len(first.references) == 3


@pytest.mark.parametrize(
    "row, message",
    [
        ({"references": ["a b"], "better": "a"}, "row 1: worse must be a caption"),
        ({"references": [], "better": "a", "worse": "b"}, "row 1: references must be"),
        ({"references": ["a"], "better": "a", "worse": "b", "image": [1]}, "row 1: image must"),
        ([1, 2], "expected a JSON object"),
    ],
)
def test_malformed_pairs_are_refused_naming_the_line(tmp_path, row, message):
    good = {"references": ["a b"], "better": "a b", "worse": "c"}
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(DataFormatError, match=message) as error:
        files.read_caption_pairs(path)
    assert error.value.line == 2 and str(path) in str(error.value)


def test_pair_set_statistic_is_the_share_of_better_above_worse_with_ties_wrong(tmp_path):
    judgments = files.read_caption_pairs(write_caption_pairs(tmp_path / "p.jsonl"))
    pairs = pairwise_sets.preference_pairs(judgments, None)
    assert all(len(pairs.gts[f"{i}a"]) == 3 for i in range(30))  # every reference kept
    rng = np.random.default_rng(1)
    scores = rng.integers(0, 3, 60).astype(float)  # many ties
    report, comparisons = pairwise_sets.pair_set_report(
        pairs, {"m": scores, "n": -scores}, resamples=200
    )
    better, worse = scores[0::2], scores[1::2]
    categories = np.array([j.category for j in judgments])
    assert report["m"]["accuracy"]["value"] == pytest.approx(100 * np.mean(better > worse))
    for name in ("long", "short"):
        wanted = 100 * np.mean((better > worse)[categories == name])
        assert report["m"][name]["value"] == pytest.approx(wanted)
    assert report["n"]["accuracy"]["value"] == pytest.approx(100 * np.mean(worse > better))
    low, high = report["m"]["accuracy"]["ci_low"], report["m"]["accuracy"]["ci_high"]
    assert low <= report["m"]["accuracy"]["value"] <= high
    assert set(comparisons["m"]) == {"n"}


def test_pair_set_bootstrap_resamples_images(tmp_path):
    judgments = files.read_caption_pairs(write_caption_pairs(tmp_path / "p.jsonl"))
    pairs = pairwise_sets.preference_pairs(judgments, None)
    image_of_pair = np.unique(pairs.images, return_inverse=True)[1]
    weights = resampling.group_counts(np.random.default_rng(0), image_of_pair, 50)
    assert (weights[:, 0::2] == weights[:, 1::2]).all()  # two pairs an image, drawn together


def test_judgment_csv_reads_json_and_python_lists(tmp_path):
    judgments = files.read_judgment_csv(write_judgment_csv(tmp_path / "set.csv"))
    assert len(judgments) == 30 and judgments[4].image_id == "img1"
    assert judgments[4].candidate_id == "4" and len(judgments[4].references) == 3
    path = tmp_path / "json.csv"
    path.write_text('mt,refs,score\na dog,"[""a dog"", ""a cat""]",0.5\n')
    (only,) = files.read_judgment_csv(path)
    assert only.references == ("a dog", "a cat") and only.image_id == "row 0"


@pytest.mark.parametrize(
    "text, message, line",
    [
        ("mt,score\na,1\n", "no column refs", 1),
        ("mt,refs,score\na,\"['x']\",1\nb,\"['y']\",high\n", "row 1: score 'high'", 3),
        ("mt,refs,score\na,\"['x']\",1\nb,not a list,1\n", "row 1: refs must be", 3),
        ('mt,refs,score\na,"[\'x\']",1\nb,"[]",1\n', "row 1: refs must be", 3),
    ],
)
def test_malformed_csv_is_refused_naming_the_row(tmp_path, text, message, line):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(DataFormatError, match=message) as error:
        files.read_judgment_csv(path)
    assert error.value.line == line


def _expert_json(tmp_path: Path) -> Path:
    data = {
        "1000268201_693b08cb0e.jpg": {
            "image_path": "Flicker8k_Dataset/1000268201_693b08cb0e.jpg",
            "ground_truth": ["a child in pink", "a girl  going into a house"],
            "human_judgement": [
                {"caption": "a dog runs", "rating": 1.0},
                {"caption": "a dog runs", "rating": 2.0},
                {"caption": "a girl going into a house", "rating": 4.0},  # its own reference
                {"caption": "a child", "rating": float("nan")},
            ],
        },
        "2": {"ground_truth": ["a cat"], "human_judgement": [{"caption": "a cat", "rating": 3}]},
    }
    path = tmp_path / "flickr8k.json"
    path.write_text(json.dumps(data))
    return path


def test_flickr8k_expert_json_keeps_each_rating_and_the_protocol(tmp_path):
    judgments = load_set("flickr8k_expert", _expert_json(tmp_path))
    assert [(j.image_id, j.candidate, j.score) for j in judgments] == [
        ("1000268201_693b08cb0e.jpg", "a dog runs", 1.0),
        ("1000268201_693b08cb0e.jpg", "a dog runs", 2.0),
    ]
    pairs = harness.group_judgments(judgments)
    assert pairs.keys == ["0"] and list(pairs.pair_of_rating) == [0, 0]


def test_flickr8k_expert_json_refuses_a_bad_rating(tmp_path):
    path = tmp_path / "bad.json"
    bad = {"x": {"ground_truth": ["a"], "human_judgement": [{"caption": "a", "rating": "4"}]}}
    path.write_text(json.dumps(bad))
    with pytest.raises(DataFormatError, match="image 'x' judgement 0: rating '4'"):
        files.read_flickr8k_expert_json(path)


def test_pascal50s_json_layout_and_its_labels(tmp_path):
    data = {
        "HC": [
            {"captions": ["a plane", "a jet"], "label": 1, "references": ["r"], "image": "x.jpg"}
        ],
        "MM": [{"captions": ["a cat", "a dog"], "label": 0, "references": ["r"], "image": 7}],
    }
    path = tmp_path / "pascal50s_hc.data"  # recognised by its content, whatever its name
    path.write_text(json.dumps(data))
    judgments = load_set("pascal50s", path)
    assert [(j.category, j.preference, j.image_id) for j in judgments] == [
        ("HC", 0.0, "x.jpg"),
        ("MM", 1.0, "7"),
    ]
    assert "label field" in pascal50s_labels(path)
    assert "48 votes" in pascal50s_labels(_write_pascal(tmp_path))
    data["MM"][0]["label"] = 2
    path.write_text(json.dumps(data))
    with pytest.raises(DataFormatError, match="MM item 0: label 2 is not 0 or 1"):
        load_set("pascal50s", path)


def _write_pascal_references(folder: Path, variable: str = "refs") -> np.ndarray:
    """pascal50S.mat as the CIDEr authors release it: ``refs``, a 1xN struct array (one
    element an image of PASCAL_PAIRS) of ``image`` (its file name) and ``sent`` (a 1x50 cell
    of its sentences). ``variable="train_sent_final"`` writes a copy's layout instead: that
    name, each image under a web address and its sentences a 50x1 cell."""
    images = sorted({image for image, *_ in PASCAL_PAIRS})
    copy = variable != "refs"
    structs = np.empty((1, len(images)), dtype=[("image", object), ("sent", object)])
    for k, image in enumerate(images):
        sentences = np.empty((50, 1) if copy else (1, 50), dtype=object)
        for s in range(50):
            sentences.flat[s] = f"sentence {s} of {image}"
        structs[0, k] = (f"http://example.org/VOC2008/{image}" if copy else image, sentences)
    scipy.io.savemat(folder / "pascal50S.mat", {variable: structs})
    return structs


@pytest.mark.parametrize("variable", ["refs", "train_sent_final"])
def test_pascal50s_references_come_from_pascal50S_mat_beside_the_pairs(tmp_path, variable):
    pairs_path = _write_pascal(tmp_path)
    structs = _write_pascal_references(tmp_path, variable)
    judgments = read_pascal50s(pairs_path)
    assert len(judgments[0].references) == 50
    assert judgments[0].references[3] == f"sentence 3 of {PASCAL_PAIRS[0][0]}"
    assert load_set("pascal50s", tmp_path) == judgments  # the folder works too
    scipy.io.savemat(tmp_path / "pascal50S.mat", {variable: structs[:, :1]})
    with pytest.raises(
        DataFormatError, match=r"pair 2: image '2008_000064\.jpg' has no references"
    ):
        read_pascal50s(pairs_path)
    scipy.io.savemat(tmp_path / "pascal50S.mat", {"sentences": structs})
    with pytest.raises(DataFormatError, match=r"pascal50S\.mat: missing variables: one of"):
        read_pascal50s(pairs_path)


# Per pair of PASCAL_PAIRS, its own votes as released in pair_pascal.mat's ``result``:
# +1 for caption a, -1 for b; 11 votes a pair, 10 for a few.
RELEASED_VOTES = [[1] * 8 + [-1] * 3, [-1] * 10, [1] * 5 + [-1] * 5 + [1]]


def _write_pascal_as_released(folder: Path, votes=RELEASED_VOTES) -> Path:
    """pair_pascal.mat as its authors ship it: the votes in its ``result`` struct, with no
    consensus_pascal.mat beside it; pascal50S.mat holds the references."""
    pairs_path = _write_pascal(folder)
    (folder / "consensus_pascal.mat").unlink()
    contents = scipy.io.loadmat(pairs_path)
    result = np.empty((1, len(votes)), dtype=[("result", object)])
    for index, pair_votes in enumerate(votes):
        result[0, index] = (np.array([pair_votes], dtype=np.float64),)
    keep = {key: contents[key] for key in ("new_input", "category", "new_data")}
    scipy.io.savemat(pairs_path, {**keep, "result": result})
    _write_pascal_references(folder)
    return pairs_path


def test_pascal50s_as_released_reads_the_pairs_own_votes(tmp_path):
    """No consensus_pascal.mat: the votes come from pair_pascal.mat's ``result``, the
    references from pascal50S.mat's ``refs``, and the labels say which votes were used."""
    pairs_path = _write_pascal_as_released(tmp_path)
    released = {
        pairs_path: {"new_input", "category", "new_data", "result"},
        tmp_path / "pascal50S.mat": {"refs"},
    }
    for path, variables in released.items():
        assert {name for name, *_ in scipy.io.whosmat(path)} == variables
    refs = scipy.io.loadmat(tmp_path / "pascal50S.mat")["refs"]
    assert refs.shape == (1, 2) and set(refs.dtype.names) == {"image", "sent"}
    assert refs[0, 0]["sent"].shape == (1, 50) and refs[0, 0]["image"][0] == "2008_000032.jpg"
    judgments = read_pascal50s(pairs_path)
    assert [j.preference for j in judgments] == [8 / 11, 0.0, 6 / 11]
    assert [j.category for j in judgments] == ["HC", "HI", "HM"]
    assert judgments[0].references[3] == f"sentence 3 of {PASCAL_PAIRS[0][0]}"
    assert load_set("pascal50s", tmp_path) == judgments  # the folder, as in pascal50s:DIR
    assert "pair_pascal.mat's result" in pascal50s_labels(tmp_path)
    assert "pair_pascal.mat's result" in pascal50s_labels(pairs_path)


def test_pascal50s_as_released_errors_name_the_pair(tmp_path):
    pairs_path = _write_pascal_as_released(tmp_path, [[1, -1], [1, 0, -1], [1]])
    with pytest.raises(DataFormatError, match=r"result of pair 1: votes \[1.0, 0.0, -1.0\]"):
        read_pascal50s(pairs_path)
    pairs_path = _write_pascal_as_released(tmp_path, [[1], [1]])
    with pytest.raises(DataFormatError, match="2 result entries for 3 pairs"):
        read_pascal50s(pairs_path)
    _write_pascal_as_released(tmp_path)
    (tmp_path / "pascal50S.mat").unlink()
    with pytest.raises(DataFormatError, match="votes come without references"):
        read_pascal50s(pairs_path)


def test_a_directory_is_one_line_and_a_byte_order_mark_is_read(tmp_path):
    """``pairs:`` given a folder: a one-line error naming it; a JSON-lines file that
    starts with a UTF-8 byte-order mark (as spreadsheet tools write) reads as without."""
    with pytest.raises(DataFormatError, match="is a directory, not a file"):
        load_set("pairs", tmp_path)
    plain = write_caption_pairs(tmp_path / "plain.jsonl")
    marked = tmp_path / "marked.jsonl"
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    assert files.read_caption_pairs(marked) == files.read_caption_pairs(plain)
    assert load_set("pairs", marked) == load_set("pairs", plain)
