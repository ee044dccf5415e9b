"""CIDEr with a chosen IDF (capsim.metrics.cider_idf): not 0 on one image, pycocoevalcap's
numbers when the corpus is the scored references, cached by the file's hash, and the
n-gram keys of the sparse counts lined up with their columns."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from capsim.errors import DataFormatError
from capsim.metrics import cider_idf, cocoeval
from capsim.metrics.cider import CiderD
from capsim.metrics.cider_idf import corpus_idf
from capsim.metrics.ngram_counts import count_ngrams
from capsim.metrics.tokenizer import ptb_tokenize

REFERENCES = {
    1: ["A man rides a horse on the beach.", "A person riding a brown horse near the sea."],
    2: ["Two dogs play with a red ball.", "Dogs chasing a ball on the grass."],
    3: ["A plate of pasta with tomato sauce.", "Spaghetti on a white plate."],
    4: ["A man riding a bicycle down the street.", "A cyclist on a city road."],
}
RESULTS = {
    1: "A man riding a horse on a beach.",
    2: "A dog plays with a ball.",
    3: "A plate of spaghetti.",
    4: "A man on a bike in the street.",
}


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """The frequencies' cache in the test's folder (METEOR's index stays where it is)."""
    monkeypatch.setattr(cider_idf, "cache_dir", lambda: tmp_path / "cache")


def _write(folder: Path, images) -> tuple[Path, Path]:
    annotations = [
        {"image_id": i, "id": 10 * i + k, "caption": c}
        for i in images
        for k, c in enumerate(REFERENCES[i])
    ]
    annotation_file = folder / "captions.json"
    annotation_file.write_text(
        json.dumps({"images": [{"id": i} for i in images], "annotations": annotations})
    )
    results_file = folder / "results.json"
    results_file.write_text(json.dumps([{"image_id": i, "caption": RESULTS[i]} for i in images]))
    return annotation_file, results_file


def _cider(annotation_file: Path, results_file: Path, idf=None) -> dict:
    coco, results = cocoeval.load_files(annotation_file, results_file)
    evaluator = cocoeval.COCOEvalCap(coco, results, cider_idf=idf)
    evaluator.params["image_id"] = results.getImgIds()
    evaluator.evaluate(verbose=False)
    return {i: v["CIDEr"] for i, v in evaluator.imgToEval.items()}


def test_one_image_scores_0_by_default_and_not_0_with_a_corpus(tmp_path):
    corpus, _ = _write(tmp_path, REFERENCES)
    single = tmp_path / "one"
    single.mkdir()
    files = _write(single, [1])
    assert _cider(*files) == {1: 0.0}  # pycocoevalcap's IDF of one image: all 0
    with_corpus = _cider(*files, idf=corpus)
    assert with_corpus[1] > 0.5


def test_a_corpus_equal_to_the_scored_references_gives_pycocoevalcap_exactly(tmp_path):
    from pycocoevalcap.cider.cider import Cider

    files = _write(tmp_path, REFERENCES)
    default = _cider(*files)
    assert _cider(*files, idf=files[0]) == default  # the same floats, bit for bit
    gts = ptb_tokenize({i: REFERENCES[i] for i in REFERENCES})
    res = ptb_tokenize({i: [RESULTS[i]] for i in RESULTS})
    _, theirs = Cider().compute_score(gts, res)
    np.testing.assert_allclose([default[i] for i in REFERENCES], theirs, rtol=0, atol=1e-12)


def test_document_frequencies_are_counted_per_image_and_cached_by_hash(tmp_path):
    corpus, _ = _write(tmp_path, REFERENCES)
    idf = corpus_idf(corpus)
    assert idf.images == 4
    assert idf.document_frequency["a man"] == 2  # images 1 and 4, once each however often
    assert idf.document_frequency["horse"] == 1 and "zebra" not in idf.document_frequency
    cached = list((tmp_path / "cache" / "cider-idf").glob("*.json"))
    assert len(cached) == 1
    assert corpus_idf(corpus) == idf  # read back from the cache
    references = {str(k): v for k, v in REFERENCES.items()}
    references["5"] = ["A zebra."]
    other = tmp_path / "refs.json"
    other.write_text(json.dumps(references))  # image -> references, the other layout
    assert corpus_idf(other).document_frequency["zebra"] == 1
    assert len(list((tmp_path / "cache" / "cider-idf").glob("*.json"))) == 2


def test_column_keys_name_each_columns_ngram():
    sentences = ["a man a man rides", "the man rides a horse", "a man rides"]
    ngrams, _ = count_ngrams(sentences, 4)
    keys = ngrams.column_keys()
    dense = ngrams.counts.toarray()
    for row, sentence in enumerate(ngrams.sentences):
        tokens = sentence.split()
        wanted = Counter(
            " ".join(tokens[s : s + n]) for n in range(1, 5) for s in range(len(tokens) - n + 1)
        )
        got = {keys[c]: dense[row, c] for c in np.flatnonzero(dense[row])}
        assert got == wanted


def test_the_command_takes_the_corpus_and_bad_corpora_are_named(tmp_path, capsys):
    corpus, _ = _write(tmp_path, REFERENCES)
    single = tmp_path / "one"
    single.mkdir()
    annotations, results = _write(single, [2])
    out = tmp_path / "scores.json"
    args = ["--annotations", str(annotations), "--results", str(results), "--out", str(out)]
    assert cocoeval.main([*args, "--cider_idf", str(corpus)]) == 0
    assert json.loads(out.read_text())["eval"]["CIDEr"] > 0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"annotations": [{"image_id": 1, "caption": ""}]}))
    with pytest.raises(DataFormatError, match="annotation 0: caption must be a non-empty string"):
        corpus_idf(bad)
    assert cocoeval.main([*args, "--cider_idf", str(tmp_path / "missing.json")]) == 1
    assert "missing.json: file does not exist" in capsys.readouterr().err
    assert CiderD(idf=corpus_idf(corpus)).n == 4
