"""Every reader meets bad bytes: seeded mutations of valid files.

Each reader gets MUTATIONS mutated copies of a valid file: truncation at a random
byte, invalid UTF-8, a missing or an extra field, NaN or Inf where a number
goes, a duplicated record, an empty file. The only outcomes allowed are a
correct parse and the library's own error (a CapsimError) naming the file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from capsim.data import captions, judgments, pascal50s, sts
from capsim.errors import CapsimError
from vtfn_jax.features import FeatureStore

FIXTURES = Path(__file__).parent / "fixtures"
MUTATIONS = 200
KINDS = ("truncate", "bad_utf8", "drop_field", "extra_field", "nan", "duplicate", "empty")
NUMBER = re.compile(rb"-?\d+(?:\.\d+)?")

COCO = {
    "images": [{"id": 1, "file_name": "a.jpg"}, {"id": 2, "file_name": "b.jpg"}],
    "annotations": [
        {"id": 10, "image_id": 1, "caption": "A dog runs."},
        {"id": 11, "image_id": 1, "caption": "A brown dog."},
        {"id": 12, "image_id": 2, "caption": "Two cats sleep."},
    ],
}
KARPATHY = {
    "images": [
        {
            "filename": "a.jpg",
            "split": "train",
            "imgid": 0,
            "sentences": [{"raw": "A dog runs.", "sentid": 0}, {"raw": "A dog.", "sentid": 1}],
        },
        {
            "filename": "b.jpg",
            "split": "test",
            "imgid": 1,
            "sentences": [{"raw": "Cats.", "sentid": 2}],
        },
    ]
}
REFS = {"img1": ["a dog runs", "a brown dog"], "img2": ["two cats"]}
CANDS = [{"image_id": "img1", "caption": "a dog"}, {"image_id": 2, "caption": "cats"}]


def _mutate_json(value, rng: np.random.Generator, kind: str):
    """One structural change at a random place of a parsed JSON value."""
    containers = []

    def walk(node):
        if isinstance(node, dict | list) and node:
            containers.append(node)
            for child in node.values() if isinstance(node, dict) else node:
                walk(child)

    walk(value)
    if not containers:
        return value
    node = containers[rng.integers(len(containers))]
    if isinstance(node, dict):
        key = list(node)[rng.integers(len(node))]
        if kind == "drop_field":
            del node[key]
        elif kind == "extra_field":
            node["unexpected"] = [1, "x"]
        elif kind == "nan":
            node[key] = float(rng.choice([np.nan, np.inf, -np.inf]))
        else:  # duplicate: the same key cannot repeat, so repeat the value under a twin key
            node[f"{key}_copy"] = node[key]
    else:
        index = int(rng.integers(len(node)))
        if kind == "drop_field":
            del node[index]
        elif kind == "extra_field":
            node.append({"unexpected": True})
        elif kind == "nan":
            node[index] = float("nan")
        else:
            node.insert(index, node[index])
    return value


def _mutate_lines(data: bytes, rng: np.random.Generator, kind: str, separator: bytes) -> bytes:
    lines = data.split(b"\n")
    row = int(rng.integers(max(len(lines) - 1, 1)))
    fields = lines[row].split(separator)
    if kind == "drop_field" and len(fields) > 1:
        del fields[int(rng.integers(len(fields)))]
    elif kind == "extra_field":
        fields.insert(int(rng.integers(len(fields) + 1)), b"extra")
    elif kind == "nan":
        numbers = list(NUMBER.finditer(lines[row]))
        if numbers:
            match = numbers[int(rng.integers(len(numbers)))]
            word = rng.choice([b"nan", b"inf", b"-inf", b"NaN"])
            lines[row] = lines[row][: match.start()] + word + lines[row][match.end() :]
            return b"\n".join(lines)
    elif kind == "duplicate":
        lines.insert(row, lines[row])
        return b"\n".join(lines)
    lines[row] = separator.join(fields)
    return b"\n".join(lines)


def mutate(data: bytes, rng: np.random.Generator, kind: str, fmt: str) -> bytes:
    """A mutated copy of ``data``; ``fmt`` is "json", "jsonl", "binary" or a field separator."""
    if kind == "empty":
        return b""
    if kind == "truncate":
        return data[: int(rng.integers(len(data)))]
    if kind == "bad_utf8":
        at = int(rng.integers(len(data) + 1))
        return data[:at] + b"\xff\xc3(" + data[at:]
    if fmt == "binary":  # no fields to edit: overwrite a random stretch with noise
        at = int(rng.integers(len(data)))
        return data[:at] + rng.bytes(8) + data[at + 8 :]
    if fmt == "json":
        return json.dumps(_mutate_json(json.loads(data), rng, kind)).encode()
    if fmt == "jsonl":
        lines = data.decode().splitlines()
        row = int(rng.integers(len(lines)))
        lines[row] = json.dumps(_mutate_json(json.loads(lines[row]), rng, kind))
        return ("\n".join(lines) + "\n").encode()
    return _mutate_lines(data, rng, kind, fmt.encode())


def _copy(source: Path, folder: Path) -> Path:
    target = folder / source.name
    target.write_bytes(source.read_bytes())
    return target


def _setup(name: str, folder: Path) -> tuple[Path, str, Callable[[Path], object]]:
    """(the file to mutate, its format, the call that reads it) for each reader."""
    judged = FIXTURES / "judgments"
    token = _copy(judged / "Flickr8k.token.txt", folder)
    if name == "coco":
        (folder / "captions_val2017.json").write_text(json.dumps(COCO))
        return folder / "captions_val2017.json", "json", captions.read_coco_captions
    if name == "karpathy":
        (folder / "dataset_coco.json").write_text(json.dumps(KARPATHY))
        return folder / "dataset_coco.json", "json", captions.read_karpathy
    if name == "flickr8k_tokens":
        return token, "\t", captions.read_flickr8k_tokens
    if name == "flickr8k_splits":
        split = folder / "Flickr_8k.trainImages.txt"
        split.write_text("1000000001_aaaaaaaaaa.jpg\n1000000002_bbbbbbbbbb.jpg\n")
        return split, "\t", lambda path: captions.read_flickr8k(token, {"train": path})
    if name == "flickr8k_expert":
        file = _copy(judged / "ExpertAnnotations.txt", folder)
        return file, "\t", lambda path: judgments.read_flickr8k_expert(path, token)
    if name == "flickr8k_cf":
        file = _copy(judged / "CrowdFlowerAnnotations.txt", folder)
        return file, "\t", lambda path: judgments.read_flickr8k_cf(path, token)
    if name == "thumb":
        refs = _copy(judged / "mscoco_references.json", folder)
        file = _copy(judged / "mscoco_THumB-1.0.jsonl", folder)
        return file, "jsonl", lambda path: judgments.read_thumb(path, refs)
    if name == "thumb_references":
        jsonl = _copy(judged / "mscoco_THumB-1.0.jsonl", folder)
        file = _copy(judged / "mscoco_references.json", folder)
        return file, "jsonl", lambda path: judgments.read_thumb(jsonl, path)
    if name == "composite":
        file = _copy(judged / "composite_8k_correctness.csv", folder)
        refs = {"1000000001_aaaaaaaaaa.jpg": ["a ref"], "1000000002_bbbbbbbbbb.jpg": ["b ref"]}
        return file, ";", lambda path: judgments.read_composite_csv(path, refs)
    if name == "pascal50s":
        from test_judgments import _write_pascal

        file = _write_pascal(folder)
        return file, "binary", pascal50s.read_pascal50s
    if name == "sts":
        file = _copy(FIXTURES / "sts" / "mini" / "2012" / "gamma.test.tsv", folder)
        return file, "\t", lambda path: sts.read_sts_tsv(path, "STS12")
    if name == "sick":
        file = _copy(FIXTURES / "sts" / "SICK.txt", folder)
        return file, "\t", sts.read_sick
    if name == "stsb":
        file = _copy(FIXTURES / "sts" / "sts-dev.csv", folder)
        return file, "\t", sts.read_sts_benchmark
    if name in ("features_ids", "features_npy"):
        FeatureStore.from_arrays(["a", "b", "c"], np.eye(3, 4), source="test").save(folder)
        file = folder / ("ids.json" if name == "features_ids" else "features.npy")
        return (
            file,
            "json" if name == "features_ids" else "binary",
            lambda path: FeatureStore.load(folder),
        )
    if name == "score_refs":
        (folder / "refs.json").write_text(json.dumps(REFS))
        return folder / "refs.json", "json", captions.read_references_json
    if name == "score_cands":
        (folder / "cands.json").write_text(json.dumps(CANDS))
        return folder / "cands.json", "json", captions.read_candidates_json
    if name in ("multi30k_images", "multi30k_captions"):
        (folder / "train_images.txt").write_text("1000092795.jpg\n10002456.jpg\n")
        for k in range(1, 6):
            (folder / f"train.{k}.en").write_text(f"Two guys, caption {k}.\nA man {k}.\n")
        file = folder / ("train_images.txt" if name == "multi30k_images" else "train.2.en")
        return file, "\t", lambda path: captions.read_multi30k(folder, "train")
    if name in ("cc3m", "cc3m_header"):
        header = "caption\timage\n" if name == "cc3m_header" else ""
        (folder / "gcc.tsv").write_text(
            f"{header}a bus station\t0_29.jpg\nan angler .\thttp://x/1.jpg\n"
        )
        return folder / "gcc.tsv", "\t", captions.read_cc3m_tsv
    if name in ("coco_lines", "coco_lines_ids"):
        ids = "57870 " if name == "coco_lines_ids" else ""
        (folder / "coco.txt").write_text(f"{ids}a restaurant table.\n{ids}wooden chairs\n")
        return folder / "coco.txt", " ", captions.read_coco_lines
    raise KeyError(name)


READERS = (
    "coco", "karpathy", "flickr8k_tokens", "flickr8k_splits", "flickr8k_expert", "flickr8k_cf",
    "thumb", "thumb_references", "composite", "pascal50s", "sts", "sick", "stsb",
    "features_ids", "features_npy", "score_refs", "score_cands", "multi30k_images",
    "multi30k_captions", "cc3m", "cc3m_header", "coco_lines", "coco_lines_ids",
)  # fmt: skip


@pytest.mark.parametrize("name", READERS)
def test_mutated_files_parse_or_fail_with_a_named_error(name, tmp_path):
    path, fmt, read = _setup(name, tmp_path)
    original = path.read_bytes()
    read(path)  # the unmutated file is valid
    failures = []
    for seed in range(MUTATIONS):
        rng = np.random.default_rng(seed)
        kind = KINDS[seed % len(KINDS)]
        try:
            path.write_bytes(mutate(original, rng, kind, fmt))
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue  # the mutation itself needs a parseable file; truncation covers the rest
        try:
            read(path)
        except CapsimError as error:
            if path.name not in str(error):
                failures.append(f"seed {seed} ({kind}): error does not name {path.name}: {error}")
        except Exception as error:
            failures.append(f"seed {seed} ({kind}): {type(error).__name__}: {error}")
    path.write_bytes(original)
    assert not failures, f"{len(failures)} of {MUTATIONS} mutations:\n" + "\n".join(failures[:12])
