"""bench/quality/dev_captions.py (i2ce_dev_retrieval.py's measure): nearest-caption retrieval
against a loop over hand-made vectors."""

from __future__ import annotations

import numpy as np

from bench.quality.dev_captions import nearest_caption_retrieval


def _reference(vectors, images):
    """Per caption: the rank of its own image when each image scores as its nearest other
    caption, ties counted against the query (a wrong image scored as high comes first)."""
    reciprocal, hits = [], []
    for query in range(len(vectors)):
        best = {}
        for other in range(len(vectors)):
            if other != query:
                sim = float(vectors[query] @ vectors[other])
                best[images[other]] = max(best.get(images[other], -np.inf), sim)
        own = best[images[query]]
        rank = 1 + sum(score >= own for image, score in best.items() if image != images[query])
        reciprocal.append(1.0 / rank)
        hits.append(rank == 1)
    return {"mrr": 100 * np.mean(reciprocal), "r1": 100 * np.mean(hits)}


def test_nearest_caption_retrieval_matches_a_loop():
    rng = np.random.default_rng(0)
    images = np.array([7, 3, 7, 5, 3, 5, 7, 9, 9])  # ids in any order; 7 has three captions
    vectors = rng.normal(size=(len(images), 4))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    got = nearest_caption_retrieval(vectors, images)
    want = _reference(vectors, images)
    assert got.keys() == want.keys()
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-9)
    assert 0 < got["mrr"] < 100


def test_captions_of_one_image_side_by_side_retrieve_it_first():
    images = np.array([0, 0, 1, 1, 2, 2])
    vectors = np.repeat(np.eye(3), 2, axis=0)  # each image's two captions are equal
    assert nearest_caption_retrieval(vectors, images) == {"mrr": 100.0, "r1": 100.0}
    # All vectors equal: every tie goes against the query, so each ranks its image last.
    same = nearest_caption_retrieval(np.ones((6, 3)) / np.sqrt(3), images)
    assert same["r1"] == 0.0 and np.isclose(same["mrr"], 100 / 3)


def test_retrain_bench_auc_is_the_trainers_pairs_and_auc():
    from bench.quality.i2ce_retrain import same_image_auc
    from capsim.data.records import CaptionRecord
    from capsim.eval.same_diff import evaluate_same_diff, make_same_diff_pairs

    texts = {f"img{i}": [f"caption {i} {k}" for k in range(5)] for i in range(12)}
    records = [
        CaptionRecord(image_id=image, caption_id=f"{image}/{k}", text=text, split="dev")
        for image, captions in texts.items()
        for k, text in enumerate(captions)
    ]

    class Scorer:  # a caption's vector: its image's direction plus a little caption noise
        def embed(self, sentences):
            out = []
            for sentence in sentences:
                _, image, k = sentence.split()
                rng = np.random.default_rng(int(image) * 10 + int(k))
                out.append(np.eye(12)[int(image)] + 0.8 * rng.normal(size=12))
            return np.array(out)

    row = same_image_auc(Scorer(), {"dev_a": records})
    want = evaluate_same_diff(Scorer().embed, make_same_diff_pairs(texts))["auc"]
    assert row["dev_a_auc"] == want == row["mean_auc"]
    assert 50 < want < 100
