"""VTFN-paper baselines: GloVe average (R/NR), word2vec, PureTextRNN and PinModelA."""

from __future__ import annotations

import dataclasses
import importlib

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest
from conftest import requires_gensim, requires_glove
from flax import nnx

from capsim import text
from capsim.data import glove
from capsim.data.records import CaptionRecord
from capsim.errors import CheckpointError
from configs import coco_gru
from vtfn_jax import evaluate, kinds, train
from vtfn_jax.baselines.glove_average import WordAverageEmbedder, glove_embedder
from vtfn_jax.baselines.language_models import CaptionLanguageModel, make_lm_loss
from vtfn_jax.baselines.word2vec import extra_caption_records, training_images_captions
from vtfn_jax.data import VtfnData, prepare_data

CONFIGS = {
    "glove_r": "glove_avg",
    "glove_nr": "glove_avg",
    "word2vec": "word2vec",
    "pure_text_rnn": "pure_text_rnn",
    "pin_model_a": "pin_model_a",
}
SMALL_DIM = 32
TINY_CAPTIONS = [
    "a dog runs on the grass",
    "a dog plays with a ball",
    "two cats sleep on a sofa",
    "a cat sits on the sofa",
    "a man rides a red bike",
    "a woman rides a bike down the street",
    "a red bus on the street",
    "a bus parked near the grass",
]


def baseline(name: str, arg: str) -> ml_collections.ConfigDict:
    return importlib.import_module(f"configs.baseline_{name}").get_config(arg)


def coco_config(name: str, shared_data, **changes) -> ml_collections.ConfigDict:
    """A runlocal COCO config evaluated on same/diff only, small and trained for a few steps."""
    size = "" if CONFIGS[name] == "glove_avg" else f",dim={SMALL_DIM}"
    config = baseline(name, f"runlocal,data_dir={shared_data}{size}")
    for name in [n for n in config.evals if n in ("retrieval", "sts", "shapes")]:
        del config.evals[name]
    config.num_steps = 4
    for entry in config.evals.values():
        entry.every = 4 if entry.get("every") else 0
    config.update(changes)
    return config


def tiny_data() -> VtfnData:
    """Just enough VtfnData for the text-only baselines: training records and a vocabulary."""
    records = [
        CaptionRecord(f"img{i // 2}", f"cap{i}", caption, "train")
        for i, caption in enumerate(TINY_CAPTIONS)
    ]
    vocab = text.Vocab.build(text.tokenize(c) for c in TINY_CAPTIONS)
    return VtfnData(vocab, {}, "none", {"train": records, "dev": [], "test": []})


def tiny_encoded(data: VtfnData) -> text.EncodedText:
    return text.encode(data.vocab, TINY_CAPTIONS, max_len=12)


def assert_finite_same_diff(results: dict) -> None:
    assert results["same_diff"]["n"] == 2000
    assert np.isfinite(results["same_diff"]["auc"]) and np.isfinite(results["same_diff"]["pearson"])


# ---------------------------------------------------------------- configs


def test_every_config_builds_its_kind_with_vtfn_data_and_eval_keys():
    vtfn = coco_gru.get_config("runlocal")
    for name, kind in CONFIGS.items():
        config = baseline(name, "runlocal")
        assert config.model.kind == kind and kind in kinds.KINDS
        assert config.data.to_dict() == vtfn.data.to_dict()
        for key in ("batch_size", "num_epochs", "optimizer", "early_stopping"):
            assert config[key] == vtfn[key], (name, key)
        evals = {k: v for k, v in config.evals.to_dict().items() if k != "dev_perplexity"}
        assert evals == vtfn.evals.to_dict()
        assert "loss" not in config
    assert baseline("glove_r", None).model.restricted
    assert not baseline("glove_nr", None).model.restricted
    assert baseline("glove_r", None).model.glove == "package"
    assert baseline("word2vec", "algorithm=cbow,dim=64").model.w2v_algorithm == "cbow"
    assert baseline("pin_model_a", "dim=32,glove=package").model.embed_dim == 50
    assert set(kinds.KINDS) == {"vtfn", "glove_avg", "word2vec", "pure_text_rnn", "pin_model_a"}


def test_config_arguments_are_checked_per_kind():
    with pytest.raises(KeyError, match="restricted"):
        baseline("word2vec", "restricted")
    with pytest.raises(KeyError, match="loss"):
        baseline("pure_text_rnn", "loss=kendall")
    with pytest.raises(ValueError, match="source must be one of"):
        baseline("glove_nr", "source=imagenet")


@requires_glove
def test_glove_average_on_the_shapes_world(tmp_path):
    config = baseline("glove_nr", "runlocal,source=shapes_world")
    assert config.data.sources == ("shapes_world",)
    assert config.to_dict() == baseline("glove_nr", "runlocal,sources=shapes_world").to_dict()
    del config.evals.retrieval
    results = train.train_and_evaluate(config, tmp_path)
    assert_finite_same_diff(results)
    assert np.isfinite(results["shapes"]["graded_spearman"])


# ---------------------------------------------------------------- GloVe average


@requires_glove
def test_glove_average_is_the_mean_of_package_vectors():
    words, vectors = glove.load_glove_package()
    row = {word: index for index, word in reversed(list(enumerate(words)))}
    embedder = glove_embedder("package", None)
    got = embedder.embed(["A dog, running.", "qqxzv zzqvx"])
    expected = np.mean([vectors[row[w]] for w in ("a", "dog", ",", "running", ".")], axis=0)
    np.testing.assert_allclose(got[0], expected, rtol=1e-6)
    np.testing.assert_array_equal(got[1], np.zeros(50))  # no known word: zero vector


@requires_glove
def test_glove_restricted_drops_words_outside_the_training_vocabulary():
    vocab = text.Vocab.build([["a", "dog"]])
    restricted, full = glove_embedder("package", vocab), glove_embedder("package", None)
    assert len(restricted.row_of) == 2
    np.testing.assert_allclose(restricted.embed(["a dog"]), full.embed(["a dog"]), rtol=1e-6)
    r_cat, nr_cat = restricted.embed(["a cat"])[0], full.embed(["a cat"])[0]
    np.testing.assert_allclose(r_cat, full.embed(["a"])[0], rtol=1e-6)
    assert not np.allclose(r_cat, nr_cat)
    assert restricted.covered(text.Vocab.build([["a", "cat"]])) == 0.5


def test_glove_text_file_and_missing_source(tmp_path):
    path = tmp_path / "glove.tiny.txt"
    path.write_text("dog 1 2\ncat 3 4\n")
    embedder = glove_embedder(str(path), None)
    np.testing.assert_allclose(embedder.embed(["dog cat ?"]), [[2.0, 3.0]])
    with pytest.raises(ValueError, match=r"model\.glove"):
        glove_embedder("", None)
    with pytest.raises(ValueError, match="2 words for 1 vectors"):
        WordAverageEmbedder(["a", "b"], np.zeros((1, 3)))


# ---------------------------------------------------------------- word2vec


def w2v_config(tmp_path, **model) -> ml_collections.ConfigDict:
    config = baseline(
        "word2vec", f"runlocal,captions=all,dim=16,w2v_min_count=1,data_dir={tmp_path}"
    )
    config.model.update(model)
    return config


def train_word2vec(config, workdir, data):
    """(embedder, summary): the word2vec kind's task, fit as the recipe fits it."""
    return kinds.KINDS["word2vec"].task(config, data).fit(workdir)


def load_word2vec(config, workdir, data):
    """(embedder, image embedder) of a word2vec workdir, as SentenceEncoder loads it."""
    return kinds.load_embedders(config, workdir, data)


@requires_gensim
def test_word2vec_is_deterministic_and_round_trips(tmp_path):
    data = tiny_data()
    config = w2v_config(tmp_path, w2v_epochs=3)
    first, summary = train_word2vec(config, tmp_path / "a", data)
    second, _ = train_word2vec(config, tmp_path / "b", data)
    sentences = ["a dog on the sofa", "a red bike", "unseenword"]
    np.testing.assert_array_equal(first.embed(sentences), second.embed(sentences))
    loaded, image_embed = load_word2vec(config, tmp_path / "a", data)
    np.testing.assert_array_equal(loaded.embed(sentences), first.embed(sentences))
    assert image_embed is None
    assert summary["train_captions"] == len(TINY_CAPTIONS) and summary["vocab_covered"] == 1.0
    assert not np.any(first.embed(sentences)[2])  # no known word: zero vector
    other_seed = config.copy_and_resolve_references()
    other_seed.seed = 1
    third, _ = train_word2vec(other_seed, tmp_path / "c", data)
    assert not np.allclose(third.embed(sentences[:1]), first.embed(sentences[:1]))


@requires_gensim
def test_word2vec_bad_algorithm_and_missing_vectors(tmp_path):
    with pytest.raises(ValueError, match=r"w2v_algorithm.*'glove'"):
        train_word2vec(w2v_config(tmp_path, w2v_algorithm="glove"), tmp_path, tiny_data())
    with pytest.raises(CheckpointError, match=r"word2vec\.kv"):
        load_word2vec(w2v_config(tmp_path), tmp_path, tiny_data())


def test_word2vec_learns_from_all_captions_of_training_images(shared_data):
    config = baseline("word2vec", f"runlocal,data_dir={shared_data},extra_sources=flickr8k")
    data = prepare_data(config)
    train_images = set(data.splits["train"].corpus.image_ids)
    records = training_images_captions(config, data)
    assert {r.image_id for r in records} == train_images
    assert len(records) > 4 * len(data.splits["train"].corpus)  # one kept per image, ~5 read
    extra = extra_caption_records(config, data)
    assert extra and all(r.image_id.startswith("flickr/") and r.split == "train" for r in extra)


# ---------------------------------------------------------------- caption language models


def tiny_model(image_dim: int | None, seed: int = 0) -> CaptionLanguageModel:
    return CaptionLanguageModel(
        len(tiny_data().vocab), 16, 32, image_dim=image_dim, rngs=nnx.Rngs(seed)
    )


def tiny_batch(with_image: bool) -> dict[str, jax.Array]:
    encoded = tiny_encoded(tiny_data())
    batch = {"ids": jnp.asarray(encoded.ids), "mask": jnp.asarray(encoded.mask)}
    if with_image:
        batch["features"] = jax.random.normal(jax.random.key(1), (len(TINY_CAPTIONS), 6))
    return batch


def test_language_model_loss_falls():
    model, batch = tiny_model(None), tiny_batch(False)
    loss_fn = make_lm_loss(with_image=False)
    optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)

    @nnx.jit
    def step(model, optimizer):
        (loss, _), grads = nnx.value_and_grad(loss_fn, has_aux=True)(model, batch, None)
        optimizer.update(model, grads)
        return loss

    losses = [float(step(model, optimizer)) for _ in range(40)]
    assert losses[0] > np.log(len(tiny_data().vocab)) - 1.0  # starts near uniform
    assert losses[-1] < 0.5 * losses[0]


@nnx.jit
def embed_text(model, ids, mask):
    return model.embed_text(ids, mask)


@nnx.jit
def next_token_logits(model, ids, mask, features=None):
    return model.next_token_logits(ids, mask, features)


def test_loss_is_the_mean_nll_of_real_next_tokens():
    model, batch = tiny_model(None), tiny_batch(False)
    loss, metrics = nnx.jit(make_lm_loss(False))(model, batch, None)
    logits = np.asarray(next_token_logits(model, batch["ids"], batch["mask"]))
    ids, mask = np.asarray(batch["ids"]), np.asarray(batch["mask"])
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -np.take_along_axis(log_probs, ids[:, 1:, None], axis=-1)[..., 0]
    np.testing.assert_allclose(loss, nll[mask[:, 1:]].mean(), rtol=1e-5)
    np.testing.assert_allclose(metrics["perplexity"], np.exp(loss), rtol=1e-6)


def test_embedding_is_the_state_after_the_last_word_and_padding_free():
    model, batch = tiny_model(None), tiny_batch(False)
    longer = text.encode(tiny_data().vocab, TINY_CAPTIONS, max_len=20)
    np.testing.assert_allclose(
        embed_text(model, batch["ids"], batch["mask"]),
        embed_text(model, jnp.asarray(longer.ids), jnp.asarray(longer.mask)),
        rtol=1e-6,
    )
    # Dropping </S> from the input changes nothing: the state is the one that predicts it.
    no_eos_mask = batch["mask"] & (batch["ids"] != text.EOS_ID)
    np.testing.assert_array_equal(
        embed_text(model, batch["ids"], batch["mask"]), embed_text(model, batch["ids"], no_eos_mask)
    )


def test_pin_model_a_text_embedding_ignores_images_and_training_uses_them():
    model, batch = tiny_model(image_dim=6), tiny_batch(True)
    ids, mask, features = batch["ids"], batch["mask"], batch["features"]
    text_only = embed_text(model, ids, mask)
    logits = next_token_logits(model, ids, mask, features)
    model.image_init.kernel[...] += 1.0
    np.testing.assert_array_equal(embed_text(model, ids, mask), text_only)
    assert not np.allclose(next_token_logits(model, ids, mask, features), logits)

    grads = nnx.jit(nnx.grad(lambda m: make_lm_loss(True)(m, batch, None)[0]))(model)
    assert float(jnp.linalg.norm(grads["image_init"]["kernel"][...])) > 0
    pure = tiny_model(image_dim=None)
    assert pure.image_init is None
    with pytest.raises(ValueError, match="no image projection"):
        pure.next_token_logits(ids, mask, features)


# ---------------------------------------------------------------- the harness, on COCO


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("glove_r", marks=requires_glove),
        pytest.param("word2vec", marks=requires_gensim),
    ],
)
def test_word_vector_baselines_train_and_evaluate(name, shared_data, tmp_path):
    config = coco_config(name, shared_data)
    results = train.train_and_evaluate(config, tmp_path)
    assert_finite_same_diff(results)
    assert results["model"] == config.model.kind
    assert 0.9 < results["train"]["vocab_covered"] <= 1.0
    _, embedder, image_embed = evaluate.load_trained(config, tmp_path)
    assert image_embed is None
    reloaded = evaluate.evaluate_trained(
        config, prepare_data(config), embedder, None, ["same_diff"]
    )
    assert reloaded["same_diff"] == results["same_diff"]


def test_pin_model_a_trains_and_evaluates(shared_data, tmp_path):
    results = train.train_and_evaluate(coco_config("pin_model_a", shared_data), tmp_path)
    assert_finite_same_diff(results)
    assert results["train"]["steps"] == 4
    assert np.isfinite(results["train"]["dev_perplexity"])
    assert results["train"]["best_dev_same_image_auc"] > 0


def test_pure_text_rnn_trains_evaluates_and_reloads_identically(shared_data, tmp_path, monkeypatch):
    trained = []
    kind = kinds.KINDS["pure_text_rnn"]

    def embedders_and_keep(model, data):
        text_embedder, image_embed = kind.embedders(model, data)
        trained.append(text_embedder)
        return text_embedder, image_embed

    replaced = dataclasses.replace(kind, embedders=embedders_and_keep)
    monkeypatch.setitem(kinds.KINDS, "pure_text_rnn", replaced)
    config = coco_config("pure_text_rnn", shared_data)
    results = train.train_and_evaluate(config, tmp_path)
    assert_finite_same_diff(results)
    assert np.isfinite(results["train"]["last_train_loss"])
    data, embedder, image_embed = evaluate.load_trained(config, tmp_path)
    assert image_embed is None
    captions = [r.text for r in data.records["test"][:20]] + ["an unseen qqxzv sentence"]
    np.testing.assert_array_equal(embedder.embed(captions), trained[0].embed(captions))
