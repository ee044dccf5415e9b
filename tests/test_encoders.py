"""capsim.encoders: shapes, padding invariance, reference loops, dropout modes, jit and gradients."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ENCODER_SPECS as SPECS
from flax import nnx

from capsim import encoders, recurrence
from capsim.embed import module_encoder

VOCAB = 12
PAD = 0
EMBED_DIM = 6
EXPECTED_OUT_DIM = {"bow_sum": 6, "bow_mean": 6, "gru": 5, "lstm": 5, "cnn": 3}
SENTENCES = [[3, 4, 5, 6, 7], [8, 2], [9]]
TOL = 1e-6


def pad_batch(sentences, length, pad_id=PAD):
    ids = np.full((len(sentences), length), pad_id, np.int32)
    mask = np.zeros((len(sentences), length), bool)
    for row, sentence in enumerate(sentences):
        ids[row, : len(sentence)] = sentence
        mask[row, : len(sentence)] = True
    return jnp.asarray(ids), jnp.asarray(mask)


def build(name, seed=0, **changes):
    """The ``name`` encoder of SPECS with ``changes`` to its own keys (or embedding_init)."""
    init = changes.pop("embedding_init", None)
    return encoders.build_encoder(
        {**SPECS[name], **changes},
        VOCAB,
        embed_dim=EMBED_DIM,
        out_dim=EXPECTED_OUT_DIM[name],
        rngs=nnx.Rngs(seed),
        embedding_init=init,
    )


def embedding_table(model):
    return np.asarray(model.embed.embedding[...])


@pytest.mark.parametrize("name", sorted(SPECS))
def test_output_shape_and_padding_invariance(name):
    model = build(name)
    ids8, mask8 = pad_batch(SENTENCES, 8)
    # PAD positions hold arbitrary ids: only the mask may decide what counts.
    ids16, mask16 = pad_batch(SENTENCES, 16, pad_id=11)
    out8 = model(ids8, mask8)
    out16 = model(ids16, mask16)
    assert out8.shape == (3, EXPECTED_OUT_DIM[name]) == (3, model.out_dim)
    assert out8.dtype == jnp.float32
    np.testing.assert_allclose(out8, out16, atol=TOL)


def test_bow_sum_is_unit_norm_sum_and_mean_is_plain_average():
    ids, mask = pad_batch(SENTENCES, 8)
    bow_sum, bow_mean = build("bow_sum"), build("bow_mean")
    table_sum, table_mean = embedding_table(bow_sum), embedding_table(bow_mean)
    for row, sentence in enumerate(SENTENCES):
        total = table_sum[sentence].sum(axis=0)
        np.testing.assert_allclose(bow_sum(ids, mask)[row], total / np.linalg.norm(total), atol=TOL)
        np.testing.assert_allclose(
            bow_mean(ids, mask)[row], table_mean[sentence].mean(axis=0), atol=TOL
        )
    np.testing.assert_allclose(np.linalg.norm(bow_sum(ids, mask), axis=1), 1.0, atol=TOL)


def test_empty_caption_gives_finite_zero_vector():
    ids = jnp.zeros((1, 4), jnp.int32)
    mask = jnp.zeros((1, 4), bool)
    for name in ("bow_sum", "bow_mean"):
        np.testing.assert_array_equal(build(name)(ids, mask), 0.0)
    assert np.all(np.isfinite(build("cnn")(ids, mask)))


@pytest.mark.parametrize("name", ["gru", "lstm"])
def test_rnn_final_state_matches_step_by_step_loop(name):
    model = build(name)
    ids, mask = pad_batch(SENTENCES, 7)
    table = embedding_table(model)
    got = model(ids, mask)
    for row, sentence in enumerate(SENTENCES):
        carry = recurrence.zero_carry(model.cell, 1)
        for token in sentence:
            carry, _ = model.cell(carry, jnp.asarray(table[token])[None])
        hidden = carry[1] if name == "lstm" else carry
        np.testing.assert_allclose(got[row], hidden[0], atol=TOL)


def test_scan_rnn_from_a_given_carry_matches_loop_and_zeroes_padded_outputs():
    cell = nnx.GRUCell(3, 4, rngs=nnx.Rngs(1))
    rng = np.random.default_rng(0)
    inputs = jnp.asarray(rng.normal(size=(2, 5, 3)), jnp.float32)
    initial = jnp.asarray(rng.normal(size=(2, 4)), jnp.float32)
    lengths = [5, 2]
    mask = jnp.arange(5)[None, :] < jnp.asarray(lengths)[:, None]
    final, outputs = recurrence.scan_rnn(cell, inputs, mask, initial)
    assert outputs.shape == (2, 5, 4)
    for row, length in enumerate(lengths):
        carry = initial[row : row + 1]
        for t in range(length):
            carry, y = cell(carry, inputs[row : row + 1, t])
            np.testing.assert_allclose(outputs[row, t], y[0], atol=TOL)
        np.testing.assert_allclose(final[row], carry[0], atol=TOL)
        np.testing.assert_array_equal(outputs[row, length:], 0.0)


def _scan_unrolls(model: nnx.Module, ids: jax.Array, mask: jax.Array) -> list:
    jaxpr = jax.make_jaxpr(lambda i, m: model(i, m))(ids, mask)
    return [eqn.params["unroll"] for eqn in jaxpr.eqns if eqn.primitive.name == "scan"]


@pytest.mark.parametrize("bidirectional", [False, True])
def test_gru_unrolls_its_time_loop_for_inference_only_with_the_same_vectors(bidirectional):
    model = encoders.RNNEncoder(20, 6, 8, rngs=nnx.Rngs(0), bidirectional=bidirectional)
    ids, mask = pad_batch(SENTENCES, 7)
    rolled = model(ids, mask)
    model.eval()
    assert set(_scan_unrolls(model, ids, mask)) == {1}  # eval mode alone keeps the loop
    module_encoder(model)  # the inference path asks for the unrolled loop
    assert set(_scan_unrolls(model, ids, mask)) == {7}
    np.testing.assert_allclose(model(ids, mask), rolled, atol=TOL)
    long_ids, long_mask = pad_batch(SENTENCES, recurrence.MAX_UNROLLED_STEPS + 1)
    assert set(_scan_unrolls(model, long_ids, long_mask)) == {1}  # compiles in bounded time
    np.testing.assert_allclose(model(long_ids, long_mask), rolled, atol=TOL)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_gru_input_tables_give_the_same_vectors_and_stay_off_the_model(bidirectional):
    model = encoders.RNNEncoder(20, 6, 8, rngs=nnx.Rngs(0), bidirectional=bidirectional)
    ids, mask = pad_batch(SENTENCES, 7)
    model.eval()
    plain = model(ids, mask)
    assert model.tabulate_inputs()
    assert model.input_table[...].shape == (20, 3 * (4 if bidirectional else 8))
    np.testing.assert_allclose(model(ids, mask), plain, atol=TOL)
    model.untabulate_inputs()
    np.testing.assert_allclose(module_encoder(model)(ids, mask), plain, atol=TOL)
    assert model.input_table is None and model.backward_input_table is None
    model.train()  # training after an inference: gradients reach the words and dense_i again
    grads = nnx.grad(lambda m: jnp.sum(m(ids, mask) ** 2))(model)
    assert np.abs(grads["embed"]["embedding"][...]).sum() > 0
    assert np.abs(grads["cell"]["dense_i"]["kernel"][...]).sum() > 0


def test_a_vocabulary_too_large_for_a_table_keeps_the_matmul(monkeypatch):
    model = encoders.RNNEncoder(20, 6, 8, rngs=nnx.Rngs(0))
    monkeypatch.setattr(encoders, "MAX_INPUT_TABLE", 20 * 24 - 1)
    assert not model.tabulate_inputs() and model.input_table is None
    monkeypatch.setattr(encoders, "MAX_INPUT_TABLE", 20 * 24)
    assert model.tabulate_inputs()


def test_an_lstm_keeps_its_input_matmul():
    model = build("lstm")
    assert not model.tabulate_inputs() and model.input_table is None
    _, mask = pad_batch(SENTENCES, 7)
    with pytest.raises(ValueError, match="projected inputs are for a GRU cell"):
        recurrence.scan_rnn(
            model.cell, jnp.zeros((3, 7, 20)), mask, recurrence.zero_carry(model.cell, 3),
            projected=True,
        )  # fmt: skip


@pytest.mark.parametrize("pooling", ["max", "mean"])
def test_cnn_width_one_matches_numpy_masked_pooling(pooling):
    model = build("cnn", widths=(1,), pooling=pooling)
    ids, mask = pad_batch(SENTENCES, 6)
    table = embedding_table(model)
    kernel = np.asarray(model.convs[0].kernel[...])[0]  # [E, F] for width 1
    bias = np.asarray(model.convs[0].bias[...])
    dense_w, dense_b = np.asarray(model.dense.kernel[...]), np.asarray(model.dense.bias[...])
    got = model(ids, mask)
    for row, sentence in enumerate(SENTENCES):
        feature_map = np.maximum(table[sentence] @ kernel + bias, 0.0)
        pooled = feature_map.max(axis=0) if pooling == "max" else feature_map.mean(axis=0)
        np.testing.assert_allclose(got[row], pooled @ dense_w + dense_b, atol=1e-5)


@pytest.mark.parametrize("name", ["gru", "cnn"])
def test_dropout_is_identity_in_eval_and_random_in_train(name):
    ids, mask = pad_batch(SENTENCES, 8)
    model = build(name, dropout=0.5)
    reference = build(name)
    nnx.update(reference, nnx.state(model, nnx.Param))
    model.eval()
    np.testing.assert_allclose(model(ids, mask), reference(ids, mask), atol=TOL)
    model.train()
    first, second = model(ids, mask), model(ids, mask)
    assert not np.allclose(first, second)
    assert not np.allclose(first, reference(ids, mask))


def test_embedding_init_is_used_and_checked():
    table = np.arange(VOCAB * EMBED_DIM, dtype=np.float32).reshape(VOCAB, -1) / 10
    for name in SPECS:
        model = build(name, embedding_init=table)
        np.testing.assert_array_equal(embedding_table(model), table)
    ids, mask = pad_batch(SENTENCES, 8)
    np.testing.assert_allclose(
        build("bow_mean", embedding_init=table)(ids, mask)[1], table[[8, 2]].mean(axis=0), atol=TOL
    )
    with pytest.raises(ValueError, match=r"\(12, 6\)"):
        build("gru", embedding_init=table[:5])
    with pytest.raises(ValueError, match="NaN"):
        build("bow_sum", embedding_init=np.full_like(table, np.nan))


@pytest.mark.parametrize("name", ["bow_sum", "lstm", "cnn"])
def test_jit_matches_eager_both_ways(name):
    model = build(name)
    ids, mask = pad_batch(SENTENCES, 8)
    eager = model(ids, mask)
    via_nnx_jit = nnx.jit(lambda m, i, k: m(i, k))(model, ids, mask)
    graphdef, state = nnx.split(model)
    via_merge = jax.jit(lambda s, i, k: nnx.merge(graphdef, s)(i, k))(state, ids, mask)
    np.testing.assert_allclose(via_nnx_jit, eager, atol=TOL)
    np.testing.assert_allclose(via_merge, eager, atol=TOL)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_gradients_reach_used_embeddings_only(name):
    model = build(name)
    ids, mask = pad_batch(SENTENCES, 8, pad_id=11)
    grads = nnx.grad(lambda m: jnp.sum(m(ids, mask) ** 2))(model)
    row_norms = np.linalg.norm(np.asarray(grads.embed.embedding[...]), axis=1)
    used = sorted({token for sentence in SENTENCES for token in sentence})
    assert np.all(np.isfinite(row_norms))
    assert np.all(row_norms[used] > 0)
    np.testing.assert_array_equal(np.delete(row_norms, used), 0.0)  # incl. the PAD id 11


def test_build_encoder_errors_name_the_problem():
    sizes = dict(embed_dim=4, out_dim=4, rngs=nnx.Rngs(0))
    with pytest.raises(KeyError, match="bow_sum"):
        encoders.build_encoder({"kind": "transformer"}, VOCAB, **sizes)
    with pytest.raises(KeyError, match=r"'gru' takes no \['widths'\].*dropout"):
        encoders.build_encoder({"kind": "gru", "widths": (1,)}, VOCAB, **sizes)
    with pytest.raises(ValueError, match="out_dim 5 must equal embed_dim 4"):
        encoders.build_encoder({"kind": "bow_sum"}, VOCAB, embed_dim=4, out_dim=5, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="max"):
        build("cnn", pooling="median")
    with pytest.raises(ValueError, match="gru"):
        encoders.RNNEncoder(VOCAB, 4, 4, cell="rnn", rngs=nnx.Rngs(0))


def test_rnn_mean_pooling_is_the_mean_of_the_prefix_states():
    """pooling="mean" averages the hidden state after each real token; padding changes nothing."""
    kwargs = dict(cell="gru", rngs=nnx.Rngs(3))
    last = encoders.RNNEncoder(VOCAB, 6, 5, **kwargs)
    mean = encoders.RNNEncoder(VOCAB, 6, 5, pooling="mean", cell="gru", rngs=nnx.Rngs(3))
    ids = jnp.array([[4, 7, 9, 2, 0, 0], [5, 6, 0, 0, 0, 0]])
    mask = ids > 0
    prefix_states = []
    for t in range(1, ids.shape[1] + 1):
        prefix_mask = mask & (jnp.arange(ids.shape[1]) < t)
        prefix_states.append(np.asarray(last(ids, prefix_mask)))
    lengths = np.asarray(mask.sum(1))
    expected = [
        np.mean([prefix_states[t][b] for t in range(n)], axis=0) for b, n in enumerate(lengths)
    ]
    np.testing.assert_allclose(mean(ids, mask), np.stack(expected), atol=1e-5)
    padded = jnp.pad(ids, ((0, 0), (0, 3)))
    np.testing.assert_allclose(mean(padded, padded > 0), mean(ids, mask), atol=1e-6)
    with pytest.raises(ValueError, match="pooling"):
        encoders.RNNEncoder(VOCAB, 4, 4, pooling="max", rngs=nnx.Rngs(0))


def test_bidirectional_rnn_reads_the_real_tokens_both_ways():
    """The vector is [forward GRU over w1..wn, backward GRU over wn..w1]; padding changes nothing."""
    bi = encoders.RNNEncoder(VOCAB, 6, 8, bidirectional=True, rngs=nnx.Rngs(5))
    one_way = encoders.RNNEncoder(VOCAB, 6, 4, rngs=nnx.Rngs(9))
    one_way.embed, one_way.cell = bi.embed, bi.cell
    ids = jnp.array([[4, 7, 9, 2, 0, 0], [5, 6, 0, 0, 0, 0]])
    mask = ids > 0
    vectors = np.asarray(bi(ids, mask))
    assert vectors.shape == (2, 8)
    np.testing.assert_allclose(vectors[:, :4], one_way(ids, mask), atol=1e-6)
    one_way.cell = bi.backward_cell
    for b, n in enumerate(np.asarray(mask.sum(1))):
        reversed_ids = ids[b : b + 1, :n][:, ::-1]
        np.testing.assert_allclose(
            vectors[b, 4:], one_way(reversed_ids, reversed_ids > 0)[0], atol=1e-6
        )
    padded = jnp.pad(ids, ((0, 0), (0, 3)))
    np.testing.assert_allclose(bi(padded, padded > 0), vectors, atol=1e-6)
    with pytest.raises(ValueError, match="splits hidden_dim in two; got 7"):
        encoders.RNNEncoder(VOCAB, 6, 7, bidirectional=True, rngs=nnx.Rngs(0))
