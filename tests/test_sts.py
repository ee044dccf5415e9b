"""STS readers and harness: hand-made fixtures against NumPy, real files against the data README."""

from __future__ import annotations

import logging
import zlib
from pathlib import Path

import numpy as np
import pytest

from capsim.data.sts import (
    StsSubset,
    read_input_and_gold,
    read_sick,
    read_sts_benchmark,
    read_sts_dir,
    read_sts_tsv,
)
from capsim.errors import DataFormatError
from capsim.eval.sts import evaluate_sts

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "sts"


def pseudo_embed(sentences: list[str]) -> np.ndarray:
    """A fixed 3-d vector per sentence text, so similarities are arbitrary but reproducible."""
    return np.stack(
        [np.random.default_rng(zlib.crc32(text.encode())).normal(size=3) for text in sentences]
    )


def numpy_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def numpy_pearson(x: np.ndarray, y: np.ndarray) -> float:
    return 100 * np.corrcoef(x, y)[0, 1]


def numpy_spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson of ranks; the fixtures have no ties, so argsort ranks are exact."""
    return numpy_pearson(np.argsort(np.argsort(x)), np.argsort(np.argsort(y)))


def subset_similarities(subset: StsSubset) -> np.ndarray:
    return numpy_cosine(pseudo_embed(subset.sentences_a), pseudo_embed(subset.sentences_b))


def test_read_fixture_dir_drops_unscored_rows_and_train_files():
    data = read_sts_dir(FIXTURES / "mini")
    assert list(data) == ["STS12", "STS16"]
    assert [s.name for s in data["STS12"]] == ["MSRvid", "gamma"]
    assert [s.name for s in data["STS16"]] == ["alpha", "beta"]
    alpha = data["STS16"][0]
    np.testing.assert_array_equal(alpha.scores, [5.0, 3.2, 1.0, 0.0])
    assert alpha.sentences_a[1] == 'alpha "two" a'
    assert "alpha unscored a" not in alpha.sentences_a
    gamma = data["STS12"][1]
    assert gamma.sentences_b[2] == "gamma three b"  # trailing space stripped
    msrvid = data["STS12"][0]
    np.testing.assert_array_equal(msrvid.scores, [5.0, 1.25, 3.0])
    assert msrvid.sentences_a == ["vid one a", "vid two a", "vid three a"]


def test_evaluate_matches_numpy_correlations():
    data = read_sts_dir(FIXTURES / "mini")
    results = evaluate_sts(pseudo_embed, data)
    for year, subsets in data.items():
        sims = [subset_similarities(subset) for subset in subsets]
        pearsons = [
            numpy_pearson(s, subset.scores) for s, subset in zip(sims, subsets, strict=True)
        ]
        spearmans = [
            numpy_spearman(s, subset.scores) for s, subset in zip(sims, subsets, strict=True)
        ]
        sizes = np.array([len(subset) for subset in subsets])
        year_result = results[year]
        for subset, pearson, spearman in zip(subsets, pearsons, spearmans, strict=True):
            entry = year_result["subsets"][subset.name]
            assert entry["n"] == len(subset)
            assert entry["pearson"] == pytest.approx(pearson, abs=1e-9)
            assert entry["spearman"] == pytest.approx(spearman, abs=1e-9)
        all_sims = np.concatenate(sims)
        all_gold = np.concatenate([subset.scores for subset in subsets])
        assert year_result["pearson_mean"] == pytest.approx(np.mean(pearsons))
        assert year_result["spearman_mean"] == pytest.approx(np.mean(spearmans))
        assert year_result["pearson_wmean"] == pytest.approx(np.dot(pearsons, sizes) / sizes.sum())
        assert year_result["spearman_wmean"] == pytest.approx(
            np.dot(spearmans, sizes) / sizes.sum()
        )
        assert year_result["pearson_all"] == pytest.approx(numpy_pearson(all_sims, all_gold))
        assert year_result["spearman_all"] == pytest.approx(numpy_spearman(all_sims, all_gold))
    # The subsets differ in size, so mean and wmean must differ: a swapped aggregation would show.
    assert results["STS16"]["pearson_mean"] != pytest.approx(results["STS16"]["pearson_wmean"])
    assert results["avg2016"] == pytest.approx(
        np.mean([results["STS16"]["subsets"][name]["pearson"] for name in ("alpha", "beta")])
    )


def test_avg2016_absent_without_sts16():
    data = read_sts_dir(FIXTURES / "mini")
    results = evaluate_sts(pseudo_embed, {"STS12": data["STS12"]})
    assert "avg2016" not in results


def test_zero_norm_embedding_gives_similarity_zero_and_is_logged(caplog):
    subset = read_sts_dir(FIXTURES / "mini")["STS16"][0]

    def embed_with_zero(sentences):
        vectors = pseudo_embed(sentences)
        vectors[[i for i, text in enumerate(sentences) if text == "alpha one a"]] = 0.0
        return vectors

    sims = subset_similarities(subset)
    sims[0] = 0.0
    with caplog.at_level(logging.WARNING):
        results = evaluate_sts(embed_with_zero, {"STS16": [subset]})
    assert "1 of 4 pairs have a zero-norm embedding" in caplog.text
    pearson = results["STS16"]["subsets"]["alpha"]["pearson"]
    assert np.isfinite(pearson)
    assert pearson == pytest.approx(numpy_pearson(sims, subset.scores))


def test_embed_with_wrong_shape_is_rejected():
    subset = read_sts_dir(FIXTURES / "mini")["STS16"][0]
    with pytest.raises(ValueError, match="STS16/alpha: embed returned shape"):
        evaluate_sts(lambda sentences: np.ones((3, 2)), {"STS16": [subset]})


def test_read_sts_benchmark_with_extra_columns():
    subset = read_sts_benchmark(FIXTURES / "sts-dev.csv")
    assert (subset.year, subset.name, len(subset)) == ("STSB", "sts-dev", 3)
    np.testing.assert_array_equal(subset.scores, [5.0, 1.4, 2.75])
    assert subset.sentences_a[1] == 'He said "no deal'
    assert subset.sentences_b[1] == "Markets fell on Monday"


def test_read_sick_layouts():
    full = read_sick(FIXTURES / "SICK.txt")
    assert (full.year, len(full)) == ("SICKR", 3)
    test_part = read_sick(FIXTURES / "SICK.txt", semeval_set="TEST")
    assert test_part.name == "SICK:TEST"
    np.testing.assert_array_equal(test_part.scores, [2.1, 4.9])
    assert test_part.sentences_b == ["A woman is slicing a tomato", "Two dogs are running"]
    annotated = read_sick(FIXTURES / "SICK_test_annotated.txt")
    np.testing.assert_array_equal(annotated.scores, [3.3, 1.2])
    assert annotated.sentences_a[0] == "There is no boy playing outdoors"
    with pytest.raises(
        DataFormatError, match=r"SICK_test_annotated.txt:1: header lacks columns \['SemEval_set'\]"
    ):
        read_sick(FIXTURES / "SICK_test_annotated.txt", semeval_set="TEST")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "4.0\ta\tb\n3.0\tonly two fields\n",
            r"bad.tsv:2: expected 3 tab-separated fields, found 2",
        ),
        ("4.0\ta\tb\n1.0\ta\tb\textra\n", r"bad.tsv:2: expected 3 tab-separated fields, found 4"),
        ("4.0\ta\tb\nhigh\ta\tb\n", r"bad.tsv:2: score 'high' is not a number"),
        ("nan\ta\tb\n", r"bad.tsv:1: score 'nan' is not finite"),
        ("4.0\ta\t \n", r"bad.tsv:1: empty sentence in a scored pair"),
    ],
)
def test_bad_tsv_lines_name_file_and_line(tmp_path, content, message):
    path = tmp_path / "bad.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataFormatError, match=message):
        read_sts_tsv(path, "STS16")


def test_non_utf8_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.tsv"
    path.write_bytes(b"4.0\ta\tb\n3.0\tcaf\xe9\tb\n")
    with pytest.raises(DataFormatError, match=r"bad.tsv:2: not valid UTF-8"):
        read_sts_tsv(path, "STS16")


def test_msrvid_line_count_mismatch(tmp_path):
    (tmp_path / "in.txt").write_text("a\tb\nc\td\n", encoding="utf-8")
    (tmp_path / "gs.txt").write_text("5.0\n", encoding="utf-8")
    with pytest.raises(
        DataFormatError, match=r"gs.txt:2: 1 score lines but .*in.txt has 2 sentence lines"
    ):
        read_input_and_gold(tmp_path / "in.txt", tmp_path / "gs.txt", "STS12", "MSRvid")


def test_bad_line_in_stsb_names_file_and_line(tmp_path):
    path = tmp_path / "sts-test.csv"
    path.write_text(
        "g\tf\t2012\t1\t2.0\ta\tb\ng\tf\t2012\t2\t2.0\tonly one sentence\n", encoding="utf-8"
    )
    with pytest.raises(
        DataFormatError, match=r"sts-test.csv:2: expected at least 7 tab-separated fields, found 6"
    ):
        read_sts_benchmark(path)


REAL_YEAR_PAIRS = {"STS12": 2358 + 750, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186}
REAL_FILE_PAIRS = {
    ("STS12", "MSRpar"): 750,
    ("STS12", "MSRvid"): 750,
    ("STS12", "SMTeuroparl"): 459,
    ("STS15", "answers-forums"): 375,
    ("STS15", "answers-students"): 750,
    ("STS16", "answer-answer"): 254,
    ("STS16", "postediting"): 244,
    ("STS16", "question-question"): 209,
}


def test_real_sts_counts(shared_data, caplog):
    with caplog.at_level(logging.INFO):
        data = read_sts_dir(shared_data / "sts")
    assert "STS13: missing well-known subsets ['SMT']" in caplog.text
    assert {year: sum(len(s) for s in subsets) for year, subsets in data.items()} == REAL_YEAR_PAIRS
    by_name = {(year, s.name): s for year, subsets in data.items() for s in subsets}
    assert len(data["STS12"]) == 5  # the two *.train.tsv files are not evaluation subsets
    for key, count in REAL_FILE_PAIRS.items():
        assert len(by_name[key]) == count, key
    for subset in by_name.values():
        assert subset.scores.min() >= 0 and subset.scores.max() <= 5
        assert len(subset.sentences_a) == len(subset.sentences_b) == len(subset.scores)
    students = by_name[("STS15", "answers-students")]
    assert any('""' in text for text in students.sentences_a + students.sentences_b)
    assert by_name[("STS12", "MSRvid")].sentences_a[0] == "a man with a hard hat is dancing ."
