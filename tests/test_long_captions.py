"""I2CE on long captions (issue 60): sentence alignment, one scorer for every length, the
generated development pairs."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import nnx

from capsim import embed
from capsim.data.judgment_files import read_caption_pairs
from capsim.errors import CaptionError
from capsim.eval import long_caption_pairs
from capsim.metrics.sentence_alignment import aggregate, align, f_score
from i2ce_jax import pretrained
from i2ce_jax import score as score_cli
from i2ce_jax.scorer import SENTENCES, WHOLE, I2CEScorer

FIXTURE = Path(__file__).parent / "fixtures" / "i2ce_one_sentence_scores.json"


def _unit(rng, *shape):
    v = rng.normal(size=shape)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def _reference_alignment(c, r, mode, wc, wr, beta):
    """Loops over hand-made sentence vectors: the definitions written out."""

    def agg(values, weights):
        values, weights = np.array(values), np.array(weights, float)
        if mode == "mean":
            return float((values * weights).sum() / weights.sum())
        if mode == "min":
            return float(values.min())
        t = float(mode.split("-")[1])
        return float(-t * np.log((weights * np.exp(-values / t)).sum() / weights.sum()))

    sims = [[float(np.dot(a, b)) for b in r] for a in c]
    p = agg([max(row) for row in sims], wc)
    rc = agg([max(sims[i][j] for i in range(len(c))) for j in range(len(r))], wr)
    if p > 0 and rc > 0:
        f = (1 + beta**2) * p * rc / (beta**2 * p + rc)
    else:
        f = min(p, rc) if beta > 0 else p
    return p, rc, f


@pytest.mark.parametrize("mode", ["mean", "min", "softmin-0.1", "softmin-1.5"])
@pytest.mark.parametrize("beta", [0.0, 0.5, 1.0, 2.0])
@pytest.mark.parametrize("weighted", [False, True])
def test_alignment_against_a_numpy_rederivation(mode, beta, weighted):
    rng = np.random.default_rng(0)
    counts = [(3, 4), (1, 2), (5, 1), (2, 2)]  # (candidate, reference) sentences per pair
    m, s, d = 5, 4, 6
    sims = np.zeros((len(counts), m, s))
    cmask = np.zeros((len(counts), m), bool)
    rmask = np.zeros((len(counts), s), bool)
    wc, wr = rng.uniform(1, 9, (len(counts), m)), rng.uniform(1, 9, (len(counts), s))
    expected = []
    for k, (nc, nr) in enumerate(counts):
        c, r = _unit(rng, nc, d), _unit(rng, nr, d)
        sims[k, :nc, :nr] = c @ r.T
        sims[k, nc:, :] = 7.0  # padding must not count
        sims[k, :, nr:] = 7.0
        cmask[k, :nc], rmask[k, :nr] = True, True
        expected.append(
            _reference_alignment(
                c, r, mode, wc[k, :nc] if weighted else [1] * nc,
                wr[k, :nr] if weighted else [1] * nr, beta,
            )
        )  # fmt: skip
    got = align(
        sims, cmask, rmask, aggregation=mode, beta=beta,
        candidate_weights=wc if weighted else None, reference_weights=wr if weighted else None,
    )  # fmt: skip
    np.testing.assert_allclose(got.precision, [e[0] for e in expected], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got.recall, [e[1] for e in expected], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got.score, [e[2] for e in expected], rtol=1e-12, atol=1e-12)


def test_f_score_is_continuous_at_zero_and_equals_a_lone_cosine():
    assert f_score(0.5, 0.5) == pytest.approx(0.5)
    assert f_score(-0.2, -0.2) == pytest.approx(-0.2)
    assert f_score(1e-12, 0.8) == pytest.approx(0.0, abs=1e-11)
    assert f_score(-1e-12, 0.8) == pytest.approx(0.0, abs=1e-11)


def test_bad_aggregations_and_rows_are_errors():
    with pytest.raises(ValueError, match="unknown sentence aggregation"):
        aggregate(np.ones((1, 2)), np.ones((1, 2), bool), "median")
    with pytest.raises(ValueError, match="no sentence"):
        aggregate(np.ones((1, 2)), np.zeros((1, 2), bool))
    with pytest.raises(ValueError, match="not finite"):
        align(np.full((1, 1, 1), np.nan), np.ones((1, 1), bool), np.ones((1, 1), bool))


def test_an_irrelevant_sentence_lowers_precision_and_leaves_recall():
    """Hand-made vectors: the candidate's third sentence restates the first less well, so
    no reference sentence's best match is it; made irrelevant, only precision moves."""
    e = np.eye(4)
    refs = np.stack([e[0], e[1]])
    good = np.stack([e[0], e[1], (e[0] + e[2]) / np.sqrt(2)])
    bad = np.stack([e[0], e[1], e[3]])
    before = align((good @ refs.T)[None], np.ones((1, 3), bool), np.ones((1, 2), bool))
    after = align((bad @ refs.T)[None], np.ones((1, 3), bool), np.ones((1, 2), bool))
    assert after.precision[0] < before.precision[0]
    assert after.recall[0] == before.recall[0]
    assert after.score[0] < before.score[0]


@pytest.fixture(scope="module")
def scorer():
    return I2CEScorer.pretrained()


REFERENCE = (
    "A brown dog runs across a green field. A man in a red shirt throws a frisbee. "
    "Trees stand behind them under a blue sky."
)
CANDIDATE = (
    "A dog is running on the grass. A man throws a frisbee to the dog. "
    "There are trees in the background."
)


def test_an_irrelevant_sentence_with_the_packaged_model(scorer):
    added = f"{CANDIDATE} A plate of broccoli sits next to a laptop on a desk."
    result = scorer.score({"a": [REFERENCE], "b": [REFERENCE]}, {"a": [CANDIDATE], "b": [added]})
    assert result.ways == [SENTENCES, SENTENCES]
    assert result.precision[1, 0] < result.precision[0, 0]
    assert result.recall[1, 0] == result.recall[0, 0]
    assert result.scores[1] < result.scores[0]


@pytest.mark.parametrize("model", ["base", "large", "research"])
def test_one_sentence_captions_score_as_before_on_the_packaged_models(model):
    fixture = json.loads(FIXTURE.read_text())
    gts, res = fixture["gts"], fixture["res"]
    auto = I2CEScorer.pretrained(model, scorer=1).score(gts, res)  # before word evidence
    whole = I2CEScorer.pretrained(model, sentences=WHOLE, scorer=1).score(gts, res)
    assert auto.ways == [WHOLE] * len(res)
    assert np.array_equal(auto.scores, whole.scores)  # bit for bit: the same path
    np.testing.assert_allclose(auto.scores, fixture["scores"][model], rtol=0, atol=1e-6)
    with_words = I2CEScorer.pretrained(model).score(gts, res)  # scorer 2: the same way
    assert with_words.ways == auto.ways
    assert auto.empty_candidates == ["empty"]


@pytest.mark.parametrize("model", ["base", "large", "research"])
def test_the_input_tables_give_the_packaged_encoders_vectors_bit_for_bit(model):
    """The scorer gathers the GRU's input projection from a table (speed, issue 60): the
    vectors are those of the [B·L, E] x [E, 3H] matmul, to the last bit."""
    encoder, vocab, _ = pretrained.load(model)
    fixture = json.loads(FIXTURE.read_text())
    sentences = [c for refs in fixture["gts"].values() for c in refs if c.strip()]
    rows = embed.token_rows(vocab, sentences)
    encode = embed.module_encoder(encoder)
    graphdef, state = nnx.split(encoder)  # the module keeps no table: the matmul path
    matmul = jax.jit(lambda state, ids, mask: nnx.merge(graphdef, state)(ids, mask))
    for _, ids, mask in embed.bucketed_batches(rows, 128):
        np.testing.assert_array_equal(encode(ids, mask), matmul(state, ids, mask))


def test_the_flag_forces_either_way_and_one_sentence_aligned_is_its_cosine(scorer):
    gts = {"p": [REFERENCE], "s": ["a dog runs on the grass"]}
    res = {"p": [CANDIDATE], "s": ["a dog running on grass"]}
    auto = scorer.score(gts, res)
    assert auto.ways == [SENTENCES, WHOLE]
    whole = I2CEScorer.pretrained(sentences=WHOLE).score(gts, res)
    assert whole.ways == [WHOLE, WHOLE] and whole.scores[1] == auto.scores[1]
    forced = I2CEScorer.pretrained(sentences=SENTENCES).score(gts, res)
    assert forced.ways == [SENTENCES, SENTENCES]
    assert forced.scores[1] == pytest.approx(auto.scores[1], abs=1e-6)  # F(c, c) = c
    assert forced.scores[0] == pytest.approx(auto.scores[0], abs=1e-6)
    assert whole.scores[0] != pytest.approx(auto.scores[0], abs=1e-4)


def test_a_paragraph_scores_the_same_alone_and_among_others(scorer):
    alone = scorer.score({"p": [REFERENCE]}, {"p": [CANDIDATE]}).scores[0]
    mixed = scorer.score(
        {"x": ["a cat on a mat"], "p": [REFERENCE, "A dog. A man."], "e": [REFERENCE]},
        {"x": ["a cat sits on a mat"], "p": [CANDIDATE], "e": [" "]},
    )
    assert mixed.ways == [WHOLE, SENTENCES, WHOLE]
    assert mixed.empty_candidates == ["e"] and mixed.scores[2] == 0.0
    # top-3 pooling of two references: the mean of both F's
    assert mixed.scores[1] == pytest.approx(np.nanmean(mixed.similarities[1]), abs=1e-12)
    assert mixed.similarities[1, 0] == pytest.approx(alone, abs=1e-6)


def test_bad_references_of_a_paragraph_name_the_id(scorer):
    with pytest.raises(CaptionError, match="p/ref1"):
        scorer.score({"p": [REFERENCE, "   "]}, {"p": [CANDIDATE]})
    with pytest.raises(CaptionError, match="p"):
        scorer.score({"p": [REFERENCE]}, {"p": [b"\xff\xfe. A dog."]})
    with pytest.raises(ValueError, match="sentences mode"):
        I2CEScorer.pretrained(sentences="paragraphs")


def test_cli_records_the_way_of_each_caption(tmp_path):
    refs, cands, out = tmp_path / "refs.json", tmp_path / "cands.json", tmp_path / "out.json"
    refs.write_text(json.dumps({"1": [REFERENCE], "2": ["a dog on the grass"]}))
    cands.write_text(
        json.dumps([{"image_id": "1", "caption": CANDIDATE}, {"image_id": "2", "caption": "a dog"}])
    )
    assert score_cli.main(["--refs", str(refs), "--cands", str(cands), "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert [row["way"] for row in result["scores"]] == [SENTENCES, WHOLE]
    assert result["by_sentences"] == 1 and "reference_precision" in result["scores"][0]
    args = ["--sentences", "whole", "--refs", str(refs), "--cands", str(cands), "--out", str(out)]
    assert score_cli.main(args) == 0
    assert {row["way"] for row in json.loads(out.read_text())["scores"]} == {WHOLE}


def _images(count):
    colours = ["red", "blue", "green"]
    return {
        "toy": [
            [
                f"A {colours[(i + k) % 3]} dog and two cats sit on bench {i} take {k}"
                for k in range(5)
            ]
            for i in range(count)
        ]
    }


def test_generated_pairs_are_seeded_corrupt_one_sentence_and_read_as_pairs(tmp_path):
    rows = long_caption_pairs.generate(_images(40), seed=3, min_images=4, max_images=6)
    assert rows == long_caption_pairs.generate(_images(40), seed=3, min_images=4, max_images=6)
    assert rows != long_caption_pairs.generate(_images(40), seed=4, min_images=4, max_images=6)
    assert {r["category"] for r in rows} == set(long_caption_pairs.CATEGORIES)
    for row in rows:
        better, worse = row["better"].split(". "), row["worse"].split(". ")
        assert (
            len(better) == len(worse)
            and sum(a != b for a, b in zip(better, worse, strict=True)) == 1
        )
        assert len(row["references"]) == 4 and row["better"] not in row["references"]
    path = tmp_path / "pairs.jsonl"
    long_caption_pairs.write_pairs(rows, path)
    judgments = read_caption_pairs(path)
    assert len(judgments) == len(rows) and judgments[0].category == rows[0]["category"]


def test_generated_pairs_from_the_held_out_dev_images(shared_data):
    images = long_caption_pairs.dev_images(shared_data)
    assert len(images["coco"]) >= 490 and len(images["flickr30k"]) >= 900
    rows = long_caption_pairs.generate(images, seed=0)
    assert len(rows) > 400


@pytest.mark.slow
def test_flickr8k_expert_candidates_score_bit_for_bit(shared_data):
    from capsim.eval.judgment_harness import score_set
    from capsim.eval.judgment_sets import load_set

    judgments = load_set("flickr8k_expert", shared_data / "flickr8k")
    pairs = score_set("flickr8k_expert", judgments, builtin=()).pairs
    auto = I2CEScorer.pretrained().score(pairs.gts, pairs.res)
    whole = I2CEScorer.pretrained(sentences=WHOLE).score(pairs.gts, pairs.res)
    went_whole = np.array([w == WHOLE for w in auto.ways])
    assert went_whole.mean() > 0.99
    assert np.array_equal(auto.scores[went_whole], whole.scores[went_whole])


def test_the_drop_in_i2ce_column_takes_the_same_path(scorer):
    from capsim.metrics.caption_files import CaptionFile
    from i2ce_jax.cocoeval import COCOEvalCap

    gts = {1: [REFERENCE, "A dog and a man play in a park."], 2: ["a dog runs on the grass"]}
    res = {1: [CANDIDATE], 2: ["a dog running on grass"]}
    coco = CaptionFile([{"image_id": i, "caption": c} for i, refs in gts.items() for c in refs])
    results = CaptionFile([{"image_id": i, "caption": c[0]} for i, c in res.items()])
    evaluator = COCOEvalCap(coco, results)
    evaluator.params["image_id"] = [1, 2]
    evaluator.evaluate(verbose=False)
    expected = scorer.score(gts, res)
    assert expected.ways == [SENTENCES, WHOLE]
    for image_id, score in zip(res, expected.scores, strict=True):
        assert evaluator.imgToEval[image_id]["I2CE"] == pytest.approx(score, abs=1e-6)


def test_the_drop_in_command_forces_a_way(tmp_path, capsys):
    from i2ce_jax import cocoeval as drop_in

    annotations, results = tmp_path / "annotations.json", tmp_path / "results.json"
    annotations.write_text(
        json.dumps(
            {"images": [{"id": 1}], "annotations": [{"image_id": 1, "id": 1, "caption": REFERENCE}]}
        )
    )
    results.write_text(json.dumps([{"image_id": 1, "caption": CANDIDATE}]))
    scores = {}
    for way in ("auto", "whole"):
        out = tmp_path / f"{way}.json"
        argv = ["--sentences", way, "--annotations", str(annotations), "--results", str(results)]
        assert drop_in.main([*argv, "--out", str(out)]) == 0
        scores[way] = json.loads(out.read_text())
    with pytest.raises(ValueError, match="sentences mode"):
        drop_in.i2ce_scorer("paragraphs")
    assert drop_in.i2ce_scorer() is drop_in.i2ce_score
    assert scores["auto"] != scores["whole"]
