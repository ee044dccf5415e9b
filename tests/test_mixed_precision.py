"""bfloat16 training that pays: no train step scatter-adds in bfloat16, and its loss is float32's.

Issue 48: ``nnx.Embed(dtype=bfloat16)`` cast the whole float32 table and gathered from the
copy, so the gradient was a bfloat16 scatter-add into a vocabulary-sized table, and an H200
trained 4.5-15x slower in bfloat16 than in float32. capsim.encoders.Embed gathers the float32
rows first. Every model that trains is checked here through the Trainer's own step, lowered on
CPU: no ``stablehlo.scatter`` of it may take a bfloat16 operand.
"""

from __future__ import annotations

import re
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from capsim import encoders, text
from capsim.train import Trainer
from configs import (
    baseline_pin_model_a,
    baseline_pure_text_rnn,
    demo_bow,
    demo_cnn,
    demo_gru,
    demo_lstm,
    i2ce_coco_margin,
    i2ce_coco_recon,
    i2ce_coco_triplet,
)
from i2ce_jax import model as i2ce_model
from vtfn_jax import model as vtfn_model
from vtfn_jax.baselines import language_models

VOCAB, DIM, HIDDEN, IMAGE_DIM = 40, 16, 32, 24
BATCH, LENGTH = 8, 9
# The training loss (dropout and all) on one batch from the same float32 weights. Measured
# |bf16 - f32|: 3e-4 to 2.3e-3 for I2CE's summed NLLs of 15-16 (relative 2e-5 to 1.4e-4), 1e-4
# and 6e-4 for the language models' NLLs near 3.7, 2e-4 to 2.1e-3 for VTFN's Pearson losses of
# -0.08 to 0.23 (near 0 at init, so only an absolute bound means anything there). rtol 5e-3
# (about bfloat16's rounding, 2^-8) plus atol 1e-2 leaves four times the largest gap, and
# still fails when a part computes wrong.
LOSS_RTOL, LOSS_ATOL = 5e-3, 1e-2


def _captions(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Padded ids and mask of BATCH random captions ``<S> words </S>`` of 3 to LENGTH tokens."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, LENGTH + 1, BATCH)
    mask = np.arange(LENGTH)[None, :] < lengths[:, None]
    ids = np.where(mask, rng.integers(len(text.SPECIALS), VOCAB, (BATCH, LENGTH)), text.PAD_ID)
    ids[:, 0], ids[np.arange(BATCH), lengths - 1] = text.BOS_ID, text.EOS_ID
    return ids.astype(np.int32), mask


def _vtfn(get_config, dtype: str):
    config = get_config(f"runlocal,dim={DIM}")
    config.batch_size, config.model.dtype = BATCH, dtype
    if config.model.encoder.kind == "cnn":
        config.model.encoder.features = 8
    ids, mask = _captions(0)
    features = np.random.default_rng(1).standard_normal((BATCH, IMAGE_DIM), np.float32)
    batch = {
        "ids": ids,
        "mask": mask,
        "features": features,
        "group": np.arange(BATCH, dtype=np.int32),
    }
    model = vtfn_model.build_model(config, VOCAB, IMAGE_DIM)
    return config, model, vtfn_model.make_loss_fn(config), batch


def _i2ce(get_config, dtype: str):
    config = get_config(f"runlocal,embed={DIM},hidden={HIDDEN},batch={BATCH}")
    config.model.dtype = dtype
    ids, mask = _captions(0)
    batch = {"anchor_ids": ids, "anchor_mask": mask, "group": np.arange(BATCH, dtype=np.int32) // 2}
    if config.loss.name != "none" and config.loss.pairing == "similar":
        batch["similar_ids"], batch["similar_mask"] = _captions(1)
    model = i2ce_model.build_model(config, VOCAB)
    return config, model, i2ce_model.make_loss_fn(config), batch


def _language_model(get_config, dtype: str):
    config = get_config(f"runlocal,dim={DIM}")
    config.batch_size, config.model.dtype = BATCH, dtype
    with_image = config.model.kind == "pin_model_a"
    words = [f"w{i}" for i in range(VOCAB - len(text.SPECIALS))]
    data = types.SimpleNamespace(vocab=text.Vocab.build([words]), image_dim=IMAGE_DIM)
    ids, mask = _captions(0)
    batch = {"ids": ids, "mask": mask}
    if with_image:
        batch["features"] = np.random.default_rng(1).standard_normal((BATCH, IMAGE_DIM), np.float32)
    model = language_models.build_language_model(config, data, with_image)
    return config, model, language_models.make_lm_loss(with_image), batch


# Every model that trains through the Trainer: (builder, its config file).
CASES = {
    "vtfn_bow": (_vtfn, demo_bow.get_config),
    "vtfn_gru": (_vtfn, demo_gru.get_config),
    "vtfn_lstm": (_vtfn, demo_lstm.get_config),
    "vtfn_cnn": (_vtfn, demo_cnn.get_config),
    "i2ce_one_branch": (_i2ce, i2ce_coco_recon.get_config),
    "i2ce_two_branches": (_i2ce, i2ce_coco_margin.get_config),
    "i2ce_three_branches": (_i2ce, i2ce_coco_triplet.get_config),
    "pure_text_rnn": (_language_model, baseline_pure_text_rnn.get_config),
    "pin_model_a": (_language_model, baseline_pin_model_a.get_config),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def built(request) -> dict:
    """One case: per dtype (config, model, loss_fn, batch); under "hlo", its bfloat16 train
    step, the Trainer's own, lowered to StableHLO."""
    build, get_config = CASES[request.param]
    out = {dtype: build(get_config, dtype) for dtype in ("float32", "bfloat16")}
    config, model, loss_fn, batch = out["bfloat16"]
    trainer = Trainer(config, model, loss_fn)
    batch = trainer.global_batch(batch)
    lowered = trainer.train_step.lower(trainer.state, batch, trainer.tables, trainer.seed)
    out["hlo"] = lowered.as_text()
    return out


# ------------------------------------------------------------------ reading StableHLO
# A scatter is printed in MLIR's generic form, its types after its update region:
#   %1 = "stablehlo.scatter"(%0, %arg0, %arg1) <{...}> ({ ^bb0(...): ... }) : (operand types,
#   indices type, update types) -> result type
# (the ``#stablehlo.scatter<...>`` attribute inside it is no op: it follows no ``= ``).
SCATTER_OP = re.compile(r'= "?stablehlo\.scatter"?[ (]')
SIGNATURE = re.compile(r"\}\) : \(([^()]*)\) -> ")
FUNCTION = re.compile(r"func\.func (?:public |private )?(@[\w.$-]+)")
ELEMENT_TYPE = re.compile(r"tensor<(?:[0-9?]+x)*(\w+)")


def scatters(hlo: str) -> list[tuple[str, str]]:
    """(the function holding it, its type signature) of every scatter op in ``hlo``."""
    starts = [m.end() for m in SCATTER_OP.finditer(hlo)]
    found = []
    for start, stop in zip(starts, [*starts[1:], len(hlo)], strict=True):
        signature = SIGNATURE.search(hlo, start, stop)
        assert signature, f"a scatter without a readable signature: {hlo[start - 40 : start + 400]}"
        functions = FUNCTION.findall(hlo, 0, start)
        found.append((functions[-1] if functions else "?", signature.group(1)))
    return found


def test_reading_finds_a_bfloat16_scatter_and_skips_the_attribute():
    def gather_from_bf16_copy(table, ids):  # nnx.Embed's order: cast the table, then gather
        return jnp.sum(jnp.take(table.astype(jnp.bfloat16), ids, axis=0).astype(jnp.float32))

    table, ids = jnp.ones((VOCAB, DIM)), jnp.arange(6)
    found = scatters(jax.jit(jax.grad(gather_from_bf16_copy)).lower(table, ids).as_text())
    assert len(found) == 1
    assert ELEMENT_TYPE.findall(found[0][1]) == ["bf16", "i32", "bf16"]


def test_no_train_step_scatter_adds_in_bfloat16(built):
    hlo = built["hlo"]
    assert "xbf16>" in hlo, "nothing in the step is bfloat16: model.dtype never reached the model"
    found = scatters(hlo)
    in_bf16 = [
        f"{fn}: stablehlo.scatter({sig})"
        for fn, sig in found
        if "bf16" in ELEMENT_TYPE.findall(sig)
    ]
    assert not in_bf16, (
        f"bfloat16 scatter-adds in the train step (a {VOCAB}x{DIM} operand is a word-vector "
        "table's gradient: look it up through capsim.encoders.Embed):\n" + "\n".join(in_bf16)
    )
    # The word vectors' gradient is still a scatter-add, of float32 rows into the table.
    table = f"tensor<{VOCAB}x"
    assert any(
        sig.startswith(table) and ELEMENT_TYPE.findall(sig)[0] == "f32" for _, sig in found
    ), found


def test_bfloat16_loss_is_float32s(built):
    losses = {}
    for dtype in ("float32", "bfloat16"):
        _, model, loss_fn, batch = built[dtype]  # in training mode: the same dropout masks
        losses[dtype] = float(nnx.jit(loss_fn)(model, batch, jax.random.key(0))[0])
    assert np.isfinite(losses["bfloat16"]), losses
    np.testing.assert_allclose(
        losses["bfloat16"], losses["float32"], rtol=LOSS_RTOL, atol=LOSS_ATOL
    )


# ------------------------------------------------------------------ the Embed itself
def test_embed_rows_match_nnx_embed_and_keep_its_parameter():
    ids = jnp.asarray(_captions(0)[0])
    for dtype in (jnp.float32, jnp.bfloat16):
        ours = encoders.Embed(VOCAB, DIM, dtype=dtype, rngs=nnx.Rngs(0))
        theirs = nnx.Embed(VOCAB, DIM, dtype=dtype, rngs=nnx.Rngs(0))
        shapes = [jax.tree.map(np.shape, nnx.to_pure_dict(nnx.state(e))) for e in (ours, theirs)]
        assert shapes[0] == shapes[1] == {"embedding": (VOCAB, DIM)}
        # Casting is elementwise, so casting the rows gives nnx.Embed's bits.
        rows = ours(ids)
        assert rows.dtype == dtype
        np.testing.assert_array_equal(rows, theirs(ids))
        query = jnp.ones((3, DIM), dtype)
        np.testing.assert_array_equal(ours.attend(query), theirs.attend(query))


# ------------------------------------------------------------------ the step's levers
def _i2ce_loss_and_grads(dtype: str, **model_changes):
    config, _, _, batch = _i2ce(i2ce_coco_margin.get_config, dtype)
    config.model.update(model_changes)
    model = i2ce_model.build_model(config, VOCAB)
    loss_fn = i2ce_model.make_loss_fn(config)
    grad_fn = nnx.value_and_grad(lambda m: loss_fn(m, batch, jax.random.key(0))[0])
    loss, grads = nnx.jit(grad_fn)(model)
    return model, float(loss), nnx.to_pure_dict(grads)


@pytest.mark.parametrize("unroll", [2, 3, LENGTH])
def test_an_unrolled_decoder_trains_what_the_rolled_one_does(unroll):
    """model.decoder_unroll changes how the time loop is compiled, not what it computes."""
    _, loss, grads = _i2ce_loss_and_grads("float32")
    _, unrolled_loss, unrolled_grads = _i2ce_loss_and_grads("float32", decoder_unroll=unroll)
    np.testing.assert_allclose(unrolled_loss, loss, rtol=1e-6)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), unrolled_grads, grads
    )


def test_bfloat16_logits_keep_the_loss_and_the_softmax_reads_float32():
    model, loss, _ = _i2ce_loss_and_grads("bfloat16", logits_dtype="bfloat16")
    _, float32_logits_loss, _ = _i2ce_loss_and_grads("bfloat16")
    outputs = jnp.ones((BATCH, LENGTH, HIDDEN), jnp.bfloat16)
    assert model.readout(outputs).dtype == jnp.bfloat16
    np.testing.assert_allclose(loss, float32_logits_loss, rtol=LOSS_RTOL, atol=LOSS_ATOL)
    # The NLL of bfloat16 logits is the float32 NLL of the same values, not a bfloat16 sum.
    logits = jax.random.normal(jax.random.key(1), (BATCH, LENGTH, VOCAB)).astype(jnp.bfloat16)
    ids, mask = _captions(2)
    np.testing.assert_array_equal(
        i2ce_model.sequence_nll(logits, ids, mask),
        i2ce_model.sequence_nll(logits.astype(jnp.float32), ids, mask),
    )


@pytest.mark.parametrize(
    "dtype, changes, match",
    [
        ("float32", {"logits_dtype": "bfloat16"}, r"logits_dtype must be float32 or the compute"),
        ("bfloat16", {"logits_dtype": "float16"}, r"logits_dtype must be float32 or the compute"),
        ("float32", {"decoder_unroll": 0}, r"decoder_unroll must be >= 1, got 0"),
    ],
)
def test_a_lever_out_of_range_is_an_error_naming_its_key(dtype, changes, match):
    with pytest.raises(ValueError, match=match):
        _i2ce_loss_and_grads(dtype, **changes)
