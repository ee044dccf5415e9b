"""BLEU, ROUGE-L and CIDEr-D: hand-computed cases, bad inputs, and pycocoevalcap's own numbers."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from capsim.errors import CaptionError
from capsim.metrics.bleu import BLEU_SMALL, BLEU_TINY, Bleu
from capsim.metrics.cider import CiderD
from capsim.metrics.coco_metrics import compute_ngram_metrics
from capsim.metrics.ngram_counts import count_ngrams, pair_ngrams
from capsim.metrics.rouge import Rouge, lcs_lengths

GOLDEN_FILE = "golden/pycocoevalcap_flickr8k_expert.json"
NGRAM_METRICS = ("BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "ROUGE-L", "CIDEr")
GOLDEN_TOLERANCE = 1e-6
CIDER_SIGMA = 6.0


def smoothed(correct: float, guess: float) -> float:
    return (correct + BLEU_TINY) / (guess + BLEU_SMALL)


def brevity(test_length: int, reference_length: int) -> float:
    """pycocoevalcap's penalty: the smoothing makes the ratio dip below 1 even for equal lengths."""
    ratio = smoothed(test_length, reference_length)
    return math.exp(1 - 1 / ratio) if ratio < 1 else 1.0


def test_bleu_matches_hand_counts():
    # Clipped matches of "the cat sat on the mat" against the two references:
    # 6/6 unigrams, 5/5 bigrams, 2/4 trigrams ("cat sat on", "on the mat"), 0/3 4-grams.
    gts = {"x": ["the cat is on the mat", "a cat sat on a mat"]}
    res = {"x": ["the cat sat on the mat"]}
    precisions = np.cumprod([smoothed(6, 6), smoothed(5, 5), smoothed(2, 4), smoothed(0, 3)])
    expected = [precisions[k] ** (1 / (k + 1)) * brevity(6, 6) for k in range(4)]
    corpus, per_caption = Bleu(4).compute_score(gts, res)
    np.testing.assert_allclose([scores[0] for scores in per_caption], expected, rtol=1e-12)
    np.testing.assert_allclose(corpus, expected, rtol=1e-12)


def test_bleu_uses_the_closest_reference_length_for_the_brevity_penalty():
    # Length 2 is closest to 4 (not 6): penalty exp(1 - 4/2).
    gts = {"short": ["a b c d", "x y z w v q"], "tie": ["a b c", "a b c d e"]}
    res = {"short": ["a b"], "tie": ["a b c d"]}
    _, per_caption = Bleu(1).compute_score(gts, res)
    assert brevity(2, 4) == pytest.approx(math.exp(-1))
    assert per_caption[0][0] == pytest.approx(smoothed(2, 2) * brevity(2, 4), rel=1e-12)
    # A tie between lengths 3 and 5 goes to 3, so the length-4 candidate is not penalised.
    assert per_caption[0][1] == pytest.approx(smoothed(4, 4), rel=1e-12)


def test_bleu_corpus_score_pools_counts_before_the_geometric_mean():
    gts = {"one": ["a b c"], "two": ["d e f g"]}
    res = {"one": ["a b c"], "two": ["d x y z"]}
    corpus, _ = Bleu(2).compute_score(gts, res)
    penalty = brevity(7, 7)
    assert corpus[0] == pytest.approx(smoothed(4, 7) * penalty, rel=1e-12)
    assert corpus[1] == pytest.approx(
        math.sqrt(smoothed(4, 7) * smoothed(2, 5)) * penalty, rel=1e-12
    )


def test_rouge_combines_best_precision_and_best_recall_over_references():
    # "a b" gives recall 2/2; "a c d e f" gives precision 3/4 (LCS "a c d").
    gts = {"x": ["a b", "a c d e f"]}
    res = {"x": ["a b c d"]}
    precision, recall, beta_sq = 0.75, 1.0, 1.2**2
    expected = (1 + beta_sq) * precision * recall / (recall + beta_sq * precision)
    mean, per_caption = Rouge().compute_score(gts, res)
    assert per_caption[0] == pytest.approx(expected, rel=1e-12)
    assert mean == pytest.approx(expected, rel=1e-12)


def test_rouge_is_zero_without_common_tokens():
    _, per_caption = Rouge().compute_score({"x": ["a b"]}, {"x": ["c d"]})
    assert per_caption.tolist() == [0.0]


def dynamic_programming_lcs(first: list[str], second: list[str]) -> int:
    table = np.zeros((len(first) + 1, len(second) + 1), dtype=int)
    for i, a in enumerate(first, 1):
        for j, b in enumerate(second, 1):
            table[i, j] = (
                table[i - 1, j - 1] + 1 if a == b else max(table[i - 1, j], table[i, j - 1])
            )
    return int(table[-1, -1])


def test_lcs_lengths_match_dynamic_programming():
    rng = random.Random(0)
    for _ in range(200):
        first = rng.choices("abcd", k=rng.randint(0, 12))
        others = [rng.choices("abcd", k=rng.randint(0, 12)) for _ in range(rng.randint(0, 4))]
        expected = [dynamic_programming_lcs(first, other) for other in others]
        assert lcs_lengths(first, others) == expected


def test_cider_matches_hand_computation():
    # Three ids with disjoint vocabularies: every n-gram has df 1, so every
    # weight is log(3) and cancels inside each cosine.
    gts = {"exact": ["u v w z"], "short": ["x y s"], "repeat": ["p q"]}
    res = {"exact": ["u v w z"], "short": ["x"], "repeat": ["p p"]}
    _, scores = CiderD().compute_score(gts, res)
    # Identical 4-token captions: cosine 1 at all four orders, no length gap.
    assert scores[0] == pytest.approx(10.0, rel=1e-12)
    # Unigram cosine 1/sqrt(3) only; the length gap of 2 costs exp(-4 / (2 sigma^2)).
    penalty = math.exp(-(2**2) / (2 * CIDER_SIGMA**2))
    assert scores[1] == pytest.approx(10 * penalty / math.sqrt(3) / 4, rel=1e-12)
    # Clipping: "p p" counts p twice, but only min(2w, w) * w enters the dot product.
    assert scores[2] == pytest.approx(10 * (1 / (2 * math.sqrt(2))) / 4, rel=1e-12)


def test_cider_gives_zero_weight_to_ngrams_in_every_ids_references():
    gts = {"a": ["a dog"], "b": ["a dog"]}
    res = {"a": ["a dog"], "b": ["a dog"]}
    mean, scores = CiderD().compute_score(gts, res)
    assert scores.tolist() == [0.0, 0.0]
    assert mean == 0.0


def test_scores_follow_the_order_of_res_and_ignore_extra_references():
    gts = {"a": ["a dog runs"], "b": ["the cat sleeps"], "unused": ["a bird"]}
    forward = compute_ngram_metrics(gts, {"a": ["a dog"], "b": ["a cat"]})
    backward = compute_ngram_metrics(gts, {"b": ["a cat"], "a": ["a dog"]})
    assert set(forward) == set(NGRAM_METRICS)
    for name in NGRAM_METRICS:
        np.testing.assert_array_equal(forward[name], backward[name][::-1])


@pytest.mark.parametrize(
    ("gts", "res", "message"),
    [
        ({"a": ["x y"]}, {"missing": ["x y"]}, "caption 'missing': no references"),
        ({"a": ["x y"]}, {"a": ["x", "y"]}, "caption 'a': expected a list with exactly one"),
        ({"a": ["x y"]}, {"a": []}, "caption 'a': expected a list with exactly one"),
        ({"a": []}, {"a": ["x y"]}, "caption 'a': empty reference list"),
        ({"a": ["x y"]}, {"a": [None]}, "caption 'a': candidate must be a string"),
        ({"a": ["x y", ""]}, {"a": ["x"]}, "caption 'a': empty or non-string reference"),
    ],
)
@pytest.mark.parametrize("scorer", [Bleu(), Rouge(), CiderD()], ids=["bleu", "rouge", "cider"])
def test_bad_inputs_name_the_id(scorer, gts, res, message):
    with pytest.raises(CaptionError, match=message):
        scorer.compute_score(gts, res)


@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_candidate_scores_zero_and_leaves_the_others_alone(empty):
    """pycocoevalcap scores an empty caption 0; CIDEr's idf still counts its references."""
    gts = {"a": ["a dog runs on grass", "the dog runs"], "b": ["a cat sleeps", "a cat on a mat"]}
    scores = compute_ngram_metrics(gts, {"a": [empty], "b": ["a cat on the mat"]})
    alone = compute_ngram_metrics({"b": gts["b"]}, {"b": ["a cat on the mat"]})
    for name in NGRAM_METRICS:
        assert scores[name][0] == 0.0
        assert scores[name][1] > 0
    np.testing.assert_allclose(scores["BLEU-4"][1], alone["BLEU-4"][0])
    assert scores["CIDEr"][1] != alone["CIDEr"][0]  # two ids' references in the idf


def test_agrees_with_pycocoevalcap_on_random_small_sets():
    from pycocoevalcap.bleu import bleu as pycoco_bleu
    from pycocoevalcap.cider import cider as pycoco_cider
    from pycocoevalcap.rouge import rouge as pycoco_rouge

    rng = random.Random(1)

    def sentence() -> str:
        return " ".join(rng.choices("abcdef", k=rng.randint(1, 9)))

    for _ in range(30):
        gts = {f"id{i}": [sentence() for _ in range(rng.randint(1, 4))] for i in range(5)}
        res = {key: [sentence()] for key in gts}
        for order in (1, 2, 4):
            ours = Bleu(order).compute_score(gts, res)
            theirs = pycoco_bleu.Bleu(order).compute_score(gts, res, verbose=0)
            np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
            np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12)
        for ours, theirs in [
            (CiderD(), pycoco_cider.Cider()),
            (Rouge(), pycoco_rouge.Rouge()),
        ]:
            mean, scores = ours.compute_score(gts, res)
            their_mean, their_scores = theirs.compute_score(gts, res)
            np.testing.assert_allclose(scores, their_scores, rtol=1e-12, atol=1e-14)
            assert mean == pytest.approx(their_mean, rel=1e-12, abs=1e-14)


def test_matches_pycocoevalcap_on_all_flickr8k_expert_pairs(shared_data):
    rows = json.loads((shared_data / GOLDEN_FILE).read_text())["rows"]
    gts = {row["key"]: row["references"] for row in rows}
    res = {row["key"]: [row["candidate"]] for row in rows}
    metrics = compute_ngram_metrics(gts, res)
    for name in NGRAM_METRICS:
        expected = np.array([row[name] for row in rows])
        np.testing.assert_allclose(metrics[name], expected, rtol=0, atol=GOLDEN_TOLERANCE)


def test_ngrams_counted_once_serve_bleu_and_cider_only_at_their_order():
    gts = {"a": ["a dog runs on grass", "a dog on the grass"], "b": ["two cats sleep"]}
    res = {"a": ["a dog runs"], "b": ["a cat sleeps"]}
    counted = pair_ngrams(gts, res, 4)
    assert np.array_equal(Bleu(4).statistics_of(counted), Bleu(4).statistics(gts, res))
    assert np.allclose(CiderD(4).scores_of(counted), CiderD(4).compute_score(gts, res)[1])
    with pytest.raises(ValueError, match="order 4, the metric needs order 3"):
        Bleu(3).statistics_of(counted)
    with pytest.raises(ValueError, match="order 4, the metric needs order 2"):
        CiderD(2).scores_of(counted)


def _counter_reference(sentences: list[str], max_order: int):
    """What a Counter per distinct sentence builds: columns numbered as first met, each
    row's n-grams in the order first met (order by order, start by start)."""
    from collections import Counter

    distinct = list(dict.fromkeys(sentences))
    columns: dict[tuple, int] = {}
    rows = []
    for sentence in distinct:
        tokens = sentence.split()
        grams = Counter(
            tuple(tokens[s : s + n])
            for n in range(1, max_order + 1)
            for s in range(len(tokens) - n + 1)
        )
        rows.append([(columns.setdefault(g, len(columns)), c) for g, c in grams.items()])
    orders = [len(g) for g in columns]
    return distinct, rows, orders


def test_ngram_counts_are_a_counter_per_sentence_in_its_order():
    """The compiled counter (one hash table over (shorter n-gram, word) keys) builds the
    very matrix a Counter per sentence does, entry order included: the sums over it, and
    so CIDEr-D's last bits, do not depend on how it was counted."""
    rng = random.Random(4)
    for _ in range(60):
        words = rng.sample("abcdefghij", rng.randint(1, 10))
        sentences = [
            " ".join(rng.choices(words, k=rng.randint(0, 14))) for _ in range(rng.randint(1, 30))
        ]
        sentences += rng.sample(sentences, len(sentences) // 3)  # repeats share a row
        max_order = rng.randint(1, 6)
        counts, rows = count_ngrams(sentences, max_order)
        distinct, expected_rows, orders = _counter_reference(sentences, max_order)
        assert rows.tolist() == [distinct.index(s) for s in sentences]
        matrix = counts.counts
        assert matrix.shape == (len(distinct), len(orders))
        for r, expected in enumerate(expected_rows):
            entries = slice(matrix.indptr[r], matrix.indptr[r + 1])
            got = zip(matrix.indices[entries].tolist(), matrix.data[entries].tolist(), strict=True)
            assert list(got) == [(column, float(count)) for column, count in expected]
        assert counts.order_onehot.argmax(1).tolist() == [n - 1 for n in orders]
        assert counts.lengths.tolist() == [len(s.split()) for s in distinct]
    # a table that grows many times over: thousands of distinct n-grams
    many = [" ".join(f"w{rng.randint(0, 5000)}" for _ in range(12)) for _ in range(3000)]
    counts, _ = count_ngrams(many, 4)
    assert counts.counts.shape[1] == len(_counter_reference(many, 4)[2])
