"""Caption-corpus readers on the real files and on small generated ones."""

from __future__ import annotations

import collections
import json

import pytest

from capsim.data.captions import (
    coco_split_from_name,
    read_coco_captions,
    read_flickr8k,
    read_flickr8k_dir,
    read_karpathy,
)
from capsim.data.records import CaptionRecord
from capsim.errors import DataFormatError


def test_coco_val2017_real_file(shared_data):
    path = shared_data / "coco" / "captions_val2017.json"
    records = read_coco_captions(path)
    assert len(records) == 25014
    assert len({record.image_id for record in records}) == 5000
    assert len({record.caption_id for record in records}) == 25014
    assert {record.split for record in records} == {"val"}
    assert records[0] == CaptionRecord(
        "179765", "38", "A black Honda motorcycle parked in front of a garage.", "val"
    )
    by_id = {record.caption_id: record for record in records}
    assert by_id["195595"].text == "THERE IS A TOILET IN THE CONER IWTH WALL PAPER"
    assert all(record.text == record.text.strip() and "\n" not in record.text for record in records)
    raw = json.loads(path.read_text(encoding="utf-8"))["annotations"]
    assert sum("\n" in a["caption"] for a in raw) == 83
    assert all(by_id[str(a["id"])].text == a["caption"].replace("\n", " ").strip() for a in raw)


@pytest.mark.parametrize(
    ("name", "split"),
    [
        ("captions_train2014.json", "train"),
        ("captions_val2017.json", "val"),
        ("captions_train2017.json", "train"),
        ("my_captions.json", "unsplit"),
    ],
)
def test_coco_split_from_file_name(name, split):
    assert coco_split_from_name(f"/data/{name}") == split


def _write_coco(path, annotations):
    path.write_text(json.dumps({"images": [], "annotations": annotations}), encoding="utf-8")
    return path


def test_coco_small_file_cleans_text_and_takes_split(tmp_path):
    path = _write_coco(
        tmp_path / "captions_train2014.json",
        [
            {"image_id": 7, "id": 70, "caption": "  A cat\non a mat. "},
            {"image_id": 8, "id": 80, "caption": "A dog."},
        ],
    )
    assert read_coco_captions(path) == [
        CaptionRecord("7", "70", "A cat on a mat.", "train"),
        CaptionRecord("8", "80", "A dog.", "train"),
    ]
    assert {record.split for record in read_coco_captions(path, split="test")} == {"test"}


def test_coco_errors_name_file_and_place(tmp_path):
    missing_caption = _write_coco(tmp_path / "a.json", [{"image_id": 7, "id": 70}])
    with pytest.raises(DataFormatError, match=r"a\.json: annotation #0"):
        read_coco_captions(missing_caption)
    broken = tmp_path / "b.json"
    broken.write_text('{"annotations": [\n{"image_id": 1,\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"b\.json:3: malformed JSON"):
        read_coco_captions(broken)
    bad_bytes = tmp_path / "c.json"
    bad_bytes.write_bytes(b'{"annotations": [\n{"caption": "caf\xe9"}]}')
    with pytest.raises(DataFormatError, match=r"c\.json:2: bytes are not valid UTF-8"):
        read_coco_captions(bad_bytes)
    with pytest.raises(DataFormatError, match="does not exist"):
        read_coco_captions(tmp_path / "absent.json")


def _karpathy_fixture(tmp_path):
    payload = {
        "dataset": "coco",
        "images": [
            {
                "filepath": "val2014",
                "filename": "COCO_val2014_000000000042.jpg",
                "cocoid": 42,
                "imgid": 0,
                "split": "test",
                "sentids": [0, 1],
                "sentences": [
                    {
                        "raw": "A man rides a horse.",
                        "tokens": ["a", "man"],
                        "sentid": 0,
                        "imgid": 0,
                    },
                    {"raw": " A horse and\nits rider ", "tokens": ["a"], "sentid": 1, "imgid": 0},
                ],
            },
            {
                "filename": "123_abc.jpg",
                "imgid": 1,
                "split": "restval",
                "sentids": [2],
                "sentences": [{"raw": "Dogs play.", "tokens": ["dogs"], "sentid": 2, "imgid": 1}],
            },
        ],
    }
    path = tmp_path / "dataset_coco.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


def test_karpathy_reader(tmp_path):
    assert read_karpathy(_karpathy_fixture(tmp_path)) == [
        CaptionRecord("42", "0", "A man rides a horse.", "test"),
        CaptionRecord("42", "1", "A horse and its rider", "test"),
        CaptionRecord("123_abc.jpg", "2", "Dogs play.", "restval"),
    ]


def test_karpathy_errors(tmp_path):
    path = tmp_path / "dataset_flickr8k.json"
    path.write_text(json.dumps({"images": [{"filename": "x.jpg", "sentences": []}]}))
    with pytest.raises(DataFormatError, match=r"dataset_flickr8k\.json: image #0"):
        read_karpathy(path)
    path.write_text(json.dumps({"sentences": []}))
    with pytest.raises(DataFormatError, match="'images' list"):
        read_karpathy(path)


def test_flickr8k_real_dir(shared_data):
    records = read_flickr8k_dir(shared_data / "flickr8k")
    assert len(records) == 40460
    splits = collections.Counter(record.split for record in records)
    assert splits == {"train": 30000, "dev": 5000, "test": 5000, "unsplit": 460}
    quirk = [record for record in records if record.image_id == "2258277193_586949ec62.jpg.1"]
    assert [record.caption_id for record in quirk] == [
        f"2258277193_586949ec62.jpg.1#{index}" for index in range(5)
    ]
    assert {record.split for record in quirk} == {"unsplit"}
    assert records[0].text.startswith("A child in a pink dress")


def test_flickr8k_small_files(tmp_path):
    tokens = tmp_path / "Flickr8k.token.txt"
    tokens.write_text("a.jpg#0\tA dog .\na.jpg#1\tDog runs\nb.jpg#0\t A cat . \n")
    train = tmp_path / "train.txt"
    train.write_text("a.jpg\n")
    assert read_flickr8k(tokens, {"train": train}) == [
        CaptionRecord("a.jpg", "a.jpg#0", "A dog .", "train"),
        CaptionRecord("a.jpg", "a.jpg#1", "Dog runs", "train"),
        CaptionRecord("b.jpg", "b.jpg#0", "A cat .", "unsplit"),
    ]


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [
        (b"a.jpg#0\tok\na.jpg#1\tone\ttab too many\n", 2, "found 2 tabs"),
        (b"a.jpg#0\tok\nb.jpg#1 no tab\n", 2, "found 0 tabs"),
        (b"a.jpg#0\tok\na.jpg#1\tok\nb.jpg\tno index\n", 3, "does not end in '#<n>'"),
        (b"a.jpg#0\tok\na.jpg#0\tagain\n", 2, "appears twice"),
        (b"a.jpg#0\tok\na.jpg#1\tcaf\xe9\n", 2, "not valid UTF-8"),
    ],
)
def test_flickr8k_errors_name_file_and_line(tmp_path, content, line, message):
    tokens = tmp_path / "Flickr8k.token.txt"
    tokens.write_bytes(content)
    with pytest.raises(DataFormatError, match=message) as info:
        read_flickr8k(tokens)
    assert info.value.line == line
    assert f"{tokens}:{line}" in str(info.value)


def test_flickr8k_split_listed_twice(tmp_path):
    tokens = tmp_path / "Flickr8k.token.txt"
    tokens.write_text("a.jpg#0\tA dog .\n")
    (tmp_path / "train.txt").write_text("a.jpg\n")
    (tmp_path / "test.txt").write_text("b.jpg\na.jpg\n")
    with pytest.raises(DataFormatError, match=r"test\.txt:2: image 'a.jpg' is already in split"):
        read_flickr8k(tokens, {"train": tmp_path / "train.txt", "test": tmp_path / "test.txt"})


def test_flickr8k_dir_missing_files(tmp_path):
    (tmp_path / "Flickr8k.token.txt").write_text("a.jpg#0\tA dog .\n")
    with pytest.raises(DataFormatError, match=r"no Flickr_8k\.trainImages\.txt"):
        read_flickr8k_dir(tmp_path)
