"""Human-judgment readers on the real Flickr8k-Expert file and on format fixtures."""

from __future__ import annotations

import collections
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.io

from capsim.data.judgments import (
    Judgment,
    PairJudgment,
    read_composite_csv,
    read_flickr8k_cf,
    read_flickr8k_expert,
    read_thumb,
)
from capsim.data.pascal50s import read_pascal50s
from capsim.errors import DataFormatError

FIXTURES = Path(__file__).parent / "fixtures" / "judgments"
TOKENS = FIXTURES / "Flickr8k.token.txt"
IMG1, IMG2, IMG3 = (
    "1000000001_aaaaaaaaaa.jpg",
    "1000000002_bbbbbbbbbb.jpg",
    "1000000003_cccccccccc.jpg",
)


# --------------------------------------------------------------------------- Flickr8k-Expert


def test_flickr8k_expert_real_file(shared_data):
    folder = shared_data / "flickr8k"
    judgments = read_flickr8k_expert(
        folder / "ExpertAnnotations.txt", folder / "Flickr8k.token.txt"
    )
    assert len(judgments) == 16992
    assert [j.rater for j in judgments[:6]] == [0, 1, 2, 0, 1, 2]
    pairs = [(j.image_id, j.candidate_id) for j in judgments[::3]]
    assert len(pairs) == 5664
    assert all(candidate.split("#")[0] != image for image, candidate in pairs)
    # Same pairs, same order as the pycocoevalcap golden file built with the same protocol.
    golden = json.loads(
        (shared_data / "golden" / "pycocoevalcap_flickr8k_expert.json").read_text(encoding="utf-8")
    )
    assert pairs == [(row["image"], row["candidate_id"]) for row in golden["rows"]]
    first = judgments[0]
    assert first.candidate.startswith("A young child is wearing blue goggles")
    assert len(first.references) == 5
    assert first.references[0].startswith("A blond woman in a blue shirt")

    everything = read_flickr8k_expert(
        folder / "ExpertAnnotations.txt", folder / "Flickr8k.token.txt", skip_own_references=False
    )
    assert len(everything) == 3 * 5822
    assert collections.Counter(j.score for j in everything) == {
        1.0: 9797,
        2.0: 4997,
        3.0: 1701,
        4.0: 971,
    }


def test_flickr8k_expert_fixture():
    judgments = read_flickr8k_expert(FIXTURES / "ExpertAnnotations.txt", TOKENS)
    assert [(j.image_id, j.candidate_id, j.score, j.rater) for j in judgments] == [
        (IMG1, f"{IMG2}#2", 1.0, 0),
        (IMG1, f"{IMG2}#2", 1.0, 1),
        (IMG1, f"{IMG2}#2", 2.0, 2),
        (IMG2, f"{IMG3}#2", 3.0, 0),
        (IMG2, f"{IMG3}#2", 2.0, 1),
        (IMG2, f"{IMG3}#2", 3.0, 2),
    ]
    assert judgments[0].candidate == "Dogs racing through snow ."
    assert judgments[0].references == (
        "A child in a red coat climbs a ladder .",
        "A kid climbing up a wooden ladder .",
        "A small girl on a ladder outside .",
        "A child climbs .",
        "Girl in red on a ladder",
    )
    with_own = read_flickr8k_expert(
        FIXTURES / "ExpertAnnotations.txt", TOKENS, skip_own_references=False
    )
    assert len(with_own) == 9 and with_own[3].candidate_id == f"{IMG1}#2"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (f"{IMG1}\t{IMG2}#9\t1\t1\t1", f"caption id '{IMG2}#9' is not in"),
        (f"{IMG1}\tnope.jpg#0\t1\t1\t1", "caption id 'nope.jpg#0' is not in"),
        (f"unknown.jpg\t{IMG2}#0\t1\t1\t1", "query image 'unknown.jpg' has no captions"),
        (f"{IMG1}\t{IMG2}#0\t1\t1", "expected 5 tab-separated fields, found 4"),
        (f"{IMG1}\t{IMG2}#0\t1\t5\t1", "expert score '5' is not a number in"),
        (f"{IMG1}\t{IMG2}#0\t1\tx\t1", "expert score 'x'"),
    ],
)
def test_flickr8k_expert_errors_name_file_and_line(tmp_path, row, message):
    path = tmp_path / "ExpertAnnotations.txt"
    path.write_text(f"{IMG1}\t{IMG2}#2\t1\t1\t2\n{row}\n")
    with pytest.raises(DataFormatError, match=message) as info:
        read_flickr8k_expert(path, TOKENS)
    assert str(info.value).startswith(f"{path}:2:")


# --------------------------------------------------------------------------- Flickr8k-CF


def test_flickr8k_cf_fixture():
    judgments = read_flickr8k_cf(FIXTURES / "CrowdFlowerAnnotations.txt", TOKENS)
    assert [(j.image_id, j.candidate_id, j.score, j.rater) for j in judgments] == [
        (IMG1, f"{IMG2}#2", 0.0, None),
        (IMG3, f"{IMG1}#0", 0.666667, None),
    ]
    assert judgments[1].candidate == "A child in a red coat climbs a ladder ."
    assert judgments[1].references[1] == "A cyclist speeds downhill ."
    assert (
        len(
            read_flickr8k_cf(
                FIXTURES / "CrowdFlowerAnnotations.txt", TOKENS, skip_own_references=False
            )
        )
        == 3
    )


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (f"{IMG1}\t{IMG2}#1\t66.7\t2\t1", "yes fraction '66.7'"),
        (f"{IMG1}\t{IMG2}#1\t0.5\ttwo\t1", "vote count 'two'"),
    ],
)
def test_flickr8k_cf_errors(tmp_path, row, message):
    path = tmp_path / "CrowdFlowerAnnotations.txt"
    path.write_text(row + "\n")
    with pytest.raises(DataFormatError, match=message) as info:
        read_flickr8k_cf(path, TOKENS)
    assert info.value.line == 1 and str(path) in str(info.value)


# --------------------------------------------------------------------------- THumB


def test_thumb_fixture_with_references():
    judgments = read_thumb(FIXTURES / "mscoco_THumB-1.0.jsonl", FIXTURES / "mscoco_references.json")
    assert [(j.image_id, j.system, j.score) for j in judgments] == [
        ("974", "Up-Down", 3.5),
        ("974", "Human", 5.0),
        ("2453", "Up-Down", 4.0),
        ("2453", "Human", 4.2),
    ]
    assert judgments[0] == Judgment(
        image_id="974",
        candidate="A group of people riding an elephant.",
        candidate_id="974#Up-Down",
        references=(
            "A man and children ride an elephant.",
            "People on an elephant in the jungle.",
            "An elephant carries a family across water.",
            "Kids riding on the back of an elephant.",
        ),
        score=3.5,
        rater=None,
        system="Up-Down",
    )


def test_thumb_without_references_file():
    judgments = read_thumb(FIXTURES / "mscoco_THumB-1.0.jsonl", None)
    assert len(judgments) == 4 and all(j.references == () for j in judgments)


def test_thumb_errors(tmp_path):
    rows = (FIXTURES / "mscoco_THumB-1.0.jsonl").read_text().splitlines()
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text(rows[0] + '\n{"SYS": \n')
    with pytest.raises(DataFormatError, match=r"bad\.jsonl:2: malformed JSON"):
        read_thumb(bad_json)
    no_score = tmp_path / "noscore.jsonl"
    no_score.write_text(json.dumps({"SYS": "X", "seg_id": "1", "hyp": "A cat."}) + "\n")
    with pytest.raises(DataFormatError, match=r"noscore\.jsonl:1: .*human_score"):
        read_thumb(no_score)
    refs = tmp_path / "refs.json"
    refs.write_text(json.dumps({"seg_id": "974", "refs": ["A man on an elephant."]}) + "\n")
    with pytest.raises(
        DataFormatError, match=r"THumB-1\.0\.jsonl:3: seg_id '2453' has no references"
    ):
        read_thumb(FIXTURES / "mscoco_THumB-1.0.jsonl", refs)
    refs.write_text(json.dumps({"seg_id": "974", "refs": "one string"}) + "\n")
    with pytest.raises(DataFormatError, match=r"refs\.json:1:"):
        read_thumb(FIXTURES / "mscoco_THumB-1.0.jsonl", refs)


# --------------------------------------------------------------------------- PASCAL-50S

PASCAL_PAIRS = [
    ("2008_000032.jpg", "A plane on a runway.", "An airplane parked at an airport.", 1),
    ("2008_000032.jpg", "A plane on a runway.", "A cat sleeping on a sofa.", 2),
    ("2008_000064.jpg", "Two people on a boat.", "A boat on the water with people.", 3),
]
# Per pair: (winner of each triplet: 1 = its B sentence, -1 = its C), and whether the
# triplets list the pair's captions swapped (B = candidate b), as the real file sometimes does.
PASCAL_VOTES = [([1, 1, -1, 1], False), ([-1, -1, -1, -1], True), ([1, -1, 1, -1], False)]
VOTES_PER_PAIR = 4


def _cell(text):
    """A 1x1 MATLAB cell holding a string, as the consensus file stores its sentences."""
    cell = np.empty((1, 1), dtype=object)
    cell[0, 0] = text
    return cell


def _write_pascal(folder, pairs=PASCAL_PAIRS, votes=PASCAL_VOTES, category_codes=None):
    new_input = np.empty((1, len(pairs)), dtype=[("image", object), ("a", object), ("b", object)])
    for index, (image, a, b, _) in enumerate(pairs):
        new_input[0, index] = (image, a, b)
    codes = category_codes or [code for *_, code in pairs]
    scipy.io.savemat(
        folder / "pair_pascal.mat",
        {
            "new_input": new_input,
            "category": np.array([codes], dtype=np.float64),
            "new_data": np.array([[6, 6], [6, 7], [6, 1]][: len(pairs)], dtype=np.float64),
        },
    )
    triplets = np.empty(
        (1, len(pairs) * VOTES_PER_PAIR),
        dtype=[("A", object), ("B", object), ("C", object), ("winner", object)],
    )
    for index, ((image, a, b, _), (winners, swapped)) in enumerate(zip(pairs, votes, strict=True)):
        first, second = (b, a) if swapped else (a, b)
        for vote, winner in enumerate(winners):
            triplets[0, index * VOTES_PER_PAIR + vote] = (
                _cell(f"reference {vote} of {image}"),
                _cell(first),
                _cell(second),
                np.array([[winner]], dtype=np.float64),
            )
    scipy.io.savemat(folder / "consensus_pascal.mat", {"triplets": triplets})
    return folder / "pair_pascal.mat"


def test_pascal50s_fixture(tmp_path):
    judgments = read_pascal50s(_write_pascal(tmp_path))
    assert [(j.category, j.preference) for j in judgments] == [
        ("HC", 0.75),
        ("HI", 1.0),
        ("HM", 0.5),
    ]
    assert judgments[1] == PairJudgment(
        image_id="2008_000032.jpg",
        candidate_a="A plane on a runway.",
        candidate_b="A cat sleeping on a sofa.",
        references=tuple(f"reference {vote} of 2008_000032.jpg" for vote in range(4)),
        preference=1.0,
        category="HI",
    )


def test_pascal50s_references_override_and_consensus_path(tmp_path):
    mat_path = _write_pascal(tmp_path)
    moved = tmp_path / "votes"
    moved.mkdir()
    shutil.move(tmp_path / "consensus_pascal.mat", moved / "consensus_pascal.mat")
    references = {"2008_000032.jpg": ["a jet"], "2008_000064.jpg": ["a boat", "people"]}
    judgments = read_pascal50s(mat_path, references, consensus_path=moved / "consensus_pascal.mat")
    assert [j.references for j in judgments] == [("a jet",), ("a jet",), ("a boat", "people")]
    with pytest.raises(DataFormatError, match=r"consensus_pascal\.mat: file does not exist"):
        read_pascal50s(mat_path)
    with pytest.raises(
        DataFormatError, match=r"pair 2: image '2008_000064\.jpg' has no references"
    ):
        read_pascal50s(
            mat_path, {"2008_000032.jpg": ["a jet"]}, consensus_path=moved / "consensus_pascal.mat"
        )


def test_pascal50s_errors(tmp_path):
    mat_path = _write_pascal(tmp_path, category_codes=[1, 9, 3])
    with pytest.raises(DataFormatError, match=r"pair_pascal\.mat: pair 1 has category"):
        read_pascal50s(mat_path)
    bad_votes = [([1, 1, -1, 1], False), ([-1, -1, 0, -1], True), ([1, -1, 1, -1], False)]
    _write_pascal(tmp_path, votes=bad_votes)
    with pytest.raises(DataFormatError, match=r"consensus_pascal\.mat: triplet 6 .*winner 0"):
        read_pascal50s(mat_path)
    _write_pascal(tmp_path)
    shutil.copy(tmp_path / "consensus_pascal.mat", tmp_path / "votes.mat")
    _write_pascal(tmp_path, [*PASCAL_PAIRS[:2], (*PASCAL_PAIRS[2][:2], "Other text.", 3)])
    with pytest.raises(DataFormatError, match=r"votes\.mat: triplet 8 .*does not match pair 2"):
        read_pascal50s(mat_path, consensus_path=tmp_path / "votes.mat")
    (tmp_path / "pair_pascal.mat").write_bytes(b"not a mat file")
    with pytest.raises(DataFormatError, match=r"pair_pascal\.mat: not a readable MATLAB"):
        read_pascal50s(mat_path)


# --------------------------------------------------------------------------- Composite

COMPOSITE = FIXTURES / "composite_8k_correctness.csv"


def test_composite_fixture():
    judgments = read_composite_csv(COMPOSITE)
    assert [(j.image_id, j.candidate, j.score) for j in judgments] == [
        (IMG1, "A child climbs a ladder.", 5.0),
        (IMG1, "A dog, running", 1.0),
        (IMG1, "A red ladder.", 3.0),
        (IMG2, "Two dogs in snow.", 4.0),
        (IMG2, "A man on a bike.", 2.0),
    ]
    assert judgments[4].candidate_id == f"{IMG2}#3"
    assert all(j.references == () for j in judgments)
    with_refs = read_composite_csv(COMPOSITE, {IMG1: ["ref one"], IMG2: ["ref two", "ref 3"]})
    assert with_refs[3].references == ("ref two", "ref 3")


def test_composite_comma_separated(tmp_path):
    path = tmp_path / "coco_correctness.csv"
    path.write_text(
        "Input.image_url,Input.text1,Answer.Q1Answer\n"
        'http://x.org/val2014/COCO_val2014_000000000042.jpg,"A cat, asleep.",4\n'
    )
    assert read_composite_csv(path) == [
        Judgment(
            "COCO_val2014_000000000042.jpg",
            "A cat, asleep.",
            "COCO_val2014_000000000042.jpg#1",
            (),
            4.0,
        )
    ]


def test_composite_errors(tmp_path):
    lines = COMPOSITE.read_text().splitlines()
    bad_score = tmp_path / "bad.csv"
    bad_score.write_text("\n".join([lines[0], lines[1], lines[2].replace(";4;", ";high;")]) + "\n")
    with pytest.raises(DataFormatError, match=r"bad\.csv:3: Answer\.Q1Answer 'high'"):
        read_composite_csv(bad_score)
    no_columns = tmp_path / "cols.csv"
    no_columns.write_text("url;caption;score\nhttp://x/a.jpg;A cat;3\n")
    with pytest.raises(DataFormatError, match=r"cols\.csv:1: header needs Input\.image_url"):
        read_composite_csv(no_columns)
    with pytest.raises(DataFormatError, match=rf"{COMPOSITE.name}:3: image '{IMG2}' has no refer"):
        read_composite_csv(COMPOSITE, {IMG1: ["ref"]})
    bad_bytes = tmp_path / "bytes.csv"
    bad_bytes.write_bytes(lines[0].encode() + b"\n;;caf\xe9;x;1\n")
    with pytest.raises(DataFormatError, match=r"bytes\.csv:2: bytes are not valid UTF-8"):
        read_composite_csv(bad_bytes)
