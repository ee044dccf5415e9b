"""I2CE end to end on the shapes world: training, scoring, CLI, bad input, devices."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from capsim.errors import CaptionError, CheckpointError, DataFormatError
from configs import i2ce_demo
from i2ce_jax import score as score_cli
from i2ce_jax.scorer import I2CEScorer
from i2ce_jax.train import train_and_evaluate

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """One small demo training run shared by the tests of this module."""
    workdir = tmp_path_factory.mktemp("i2ce_demo")
    config = i2ce_demo.get_config("runlocal")
    summary = train_and_evaluate(config, workdir)
    return workdir, config, summary


@pytest.fixture(scope="module")
def scorer(demo_run):
    return I2CEScorer.from_checkpoint(demo_run[0])


@pytest.fixture(scope="module")
def world():
    from capsim.data.shapes_world import ShapesWorldConfig, generate_world

    return generate_world(ShapesWorldConfig(num_scenes=200, seed=0))


def test_demo_loss_falls_and_beats_chance(demo_run):
    workdir, _, summary = demo_run
    records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    losses = [r["train/loss"] for r in records if "train/loss" in r]
    assert losses[-1] < 0.8 * losses[0], losses
    # Chance is 50 AUC and 0 tau: the stated margins are +10 AUC and +10 tau-c points.
    assert summary["best_dev_same_image_auc"] > 60
    assert summary["judgments"]["I2CE"] > 10
    assert set(summary["judgments"]) >= {"BLEU-4", "ROUGE-L", "CIDEr", "I2CE"}
    assert json.loads((workdir / "results.json").read_text())["steps"] == summary["steps"]


def test_reference_identical_candidate_beats_wrong_object(demo_run, world):
    wrong = {c.image_id: c for c in world.candidates if c.error_type == "wrong_shape"}
    gts, res = {}, {}
    for image_id, cand in wrong.items():
        gts[f"{image_id}/same"] = gts[f"{image_id}/wrong"] = list(cand.references)
        res[f"{image_id}/same"] = [cand.references[0]]
        res[f"{image_id}/wrong"] = [cand.text]
    wins = {}
    for pooling in ("top-1", "top-3"):
        scorer = I2CEScorer.from_checkpoint(demo_run[0], pooling=pooling)
        by_key = dict(zip(res, scorer.compute_score(gts, res)[1], strict=True))
        wins[pooling] = np.mean([by_key[f"{i}/same"] > by_key[f"{i}/wrong"] for i in wrong])
    assert len(wrong) >= 10
    # top-1: the identical reference scores 1 and a one-shape edit must score less.
    assert wins["top-1"] == 1.0
    # top-3 also averages two other references, which may be in the other register.
    assert wins["top-3"] >= 0.7, wins


def test_score_independent_of_other_captions_and_batch_size(demo_run, scorer, world):
    cands = world.candidates[:12]
    gts = {str(i): list(c.references) for i, c in enumerate(cands)}
    res = {str(i): [c.text] for i, c in enumerate(cands)}
    _, together = scorer.compute_score(gts, res)
    alone = [scorer.compute_score({k: gts[k]}, {k: res[k]})[1][0] for k in res]
    small = I2CEScorer.from_checkpoint(demo_run[0], batch_size=4)
    _, small_batches = small.compute_score(gts, res)
    np.testing.assert_allclose(together, alone, atol=1e-6)
    np.testing.assert_allclose(together, small_batches, atol=1e-6)
    assert np.all((together >= -1) & (together <= 1))


def test_pooling_modes_are_ordered(demo_run, world):
    cands = world.candidates[:20]
    gts = {str(i): list(c.references) for i, c in enumerate(cands)}
    res = {str(i): [c.text] for i, c in enumerate(cands)}
    pooled = [
        I2CEScorer.from_checkpoint(demo_run[0], pooling=f"top-{k}").compute_score(gts, res)[1]
        for k in range(1, 6)
    ]
    for higher, lower in itertools.pairwise(pooled):
        assert np.all(higher >= lower - 1e-6)  # the mean of the top k falls as k grows


@pytest.mark.parametrize(
    ("gts", "res", "match"),
    [
        ({"a": ["a red square"]}, {"b": ["a red square"]}, "'b'.*no references"),
        ({"a": ["a red square"]}, {"a": ["x", "y"]}, "'a'.*exactly one"),
        ({"a": ["a red square"]}, {"a": [7]}, "'a'.*must be a string"),
        ({"a": ["a red square"]}, {"a": [b"caf\xe9"]}, "'a'.*UTF-8"),
        ({"a": []}, {"a": ["a red square"]}, "'a'.*non-empty"),
        ({"a": [""]}, {"a": ["a red square"]}, "'a/ref0'.*empty"),
        ({"a": ["ok", " \t"]}, {"a": ["a red square"]}, "'a/ref1'.*empty"),
        ({"a": ["ok", None]}, {"a": ["a red square"]}, "'a/ref1'.*must be a string"),
    ],
)
def test_bad_scoring_input_names_the_id(scorer, gts, res, match):
    with pytest.raises(CaptionError, match=match):
        scorer.compute_score(gts, res)


def test_missing_or_corrupt_checkpoint(tmp_path, demo_run):
    with pytest.raises(CheckpointError, match="does not exist"):
        I2CEScorer.from_checkpoint(tmp_path / "missing")
    with pytest.raises(CheckpointError, match="holds no checkpoint"):
        I2CEScorer.from_checkpoint(tmp_path)
    broken = tmp_path / "broken"
    (broken / "best" / "7").mkdir(parents=True)
    for name in ("config.json", "vocab.json"):
        (broken / name).write_bytes((demo_run[0] / name).read_bytes())
    with pytest.raises(CheckpointError, match="unreadable"):
        I2CEScorer.from_checkpoint(broken)


def test_cli_scores_and_keeps_old_output_on_error(tmp_path, demo_run, world):
    cand = world.candidates[0]
    refs = tmp_path / "refs.json"
    cands = tmp_path / "cands.json"
    out = tmp_path / "scores.json"
    refs.write_text(json.dumps({cand.image_id: list(cand.references)}))
    cands.write_text(json.dumps([{"image_id": cand.image_id, "caption": cand.text}]))
    args = ["--checkpoint", str(demo_run[0]), "--refs", str(refs), "--cands", str(cands)]
    assert score_cli.main([*args, "--out", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["scores"][0]["image_id"] == cand.image_id
    assert len(written["scores"][0]["reference_similarities"]) == len(cand.references)

    cands.write_text(json.dumps([{"image_id": cand.image_id}]))
    with pytest.raises(DataFormatError, match=r"cands.json.*entry 0"):
        score_cli.main([*args, "--out", str(out)])
    cands.write_text(json.dumps([{"image_id": "nope", "caption": cand.text}]))
    with pytest.raises(CaptionError, match="'nope' has no references"):
        score_cli.main([*args, "--out", str(out)])
    assert json.loads(out.read_text()) == written  # nothing already written is lost

    refs.write_bytes(b'{"x": ["caf\xe9"]}')
    with pytest.raises(DataFormatError, match=r"refs.json.*UTF-8"):
        score_cli.main([*args, "--out", str(out)])


def test_unknown_config_key_is_an_error():
    with pytest.raises(KeyError, match="unknown config argument 'lsos'"):
        i2ce_demo.get_config("lsos=margin")
    config = i2ce_demo.get_config()
    with pytest.raises(AttributeError):
        _ = config.loss.no_such_key


def test_sequence_nll_matches_a_numpy_log_softmax():
    """Summed over the real tokens of each caption, averaged over captions."""
    from i2ce_jax.model import sequence_nll

    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 3, 5)).astype(np.float32)
    targets = np.array([[1, 4, 0], [2, 2, 3]])
    mask = np.array([[1, 1, 0], [1, 1, 1]], np.float32)
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    token_nll = -np.take_along_axis(log_probs, targets[..., None], -1)[..., 0]
    expected = (token_nll * mask).sum(1).mean()
    np.testing.assert_allclose(sequence_nll(logits, targets, mask), expected, rtol=1e-6)
