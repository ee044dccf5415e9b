"""config.model.dtype: bfloat16 compute with float32 parameters, close to float32, trainable."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ENCODER_SPECS as SPECS
from flax import nnx
from jax.extend.core import jaxprs_in_params

from capsim import encoders
from capsim.train import Trainer
from configs import demo_gru, i2ce_coco_margin
from i2ce_jax import model as i2ce_model
from vtfn_jax import model as vtfn_model

VOCAB = 40
IMAGE_DIM = 24
BATCH, LENGTH = 8, 9
EMBED_DIM, OUT_DIM = 16, 12
# bfloat16 keeps 8 bits of mantissa: outputs of order 1 agree to about 1e-2.
BF16_ATOL = 3e-2
BF16_LOSS_RTOL = 2e-2  # plus BF16_ATOL: an untrained VTFN's Pearson loss is near 0


def _tokens(seed: int = 0) -> tuple[jax.Array, jax.Array]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, LENGTH + 1, BATCH)
    mask = np.arange(LENGTH)[None, :] < lengths[:, None]
    ids = np.where(mask, rng.integers(4, VOCAB, (BATCH, LENGTH)), 0).astype(np.int32)
    return jnp.asarray(ids), jnp.asarray(mask)


def _param_dtypes(model: nnx.Module) -> set[str]:
    return {str(leaf.dtype) for leaf in jax.tree.leaves(nnx.state(model, nnx.Param))}


def _matmul_operand_dtypes(fn, *args) -> set[str]:
    """Operand dtypes of every dot_general and convolution in ``fn``'s jaxpr (scan bodies too)."""
    found: set[str] = set()

    def visit(jaxpr) -> None:
        for eqn in jaxpr.eqns:
            if eqn.primitive.name in ("dot_general", "conv_general_dilated"):
                found.update(str(v.aval.dtype) for v in eqn.invars)
            for sub in jaxprs_in_params(eqn.params):
                visit(sub)

    visit(jax.make_jaxpr(fn)(*args).jaxpr)
    return found


def _encoder(name: str, dtype: str) -> nnx.Module:
    out_dim = EMBED_DIM if name.startswith("bow") else OUT_DIM
    return encoders.build_encoder(
        SPECS[name], VOCAB, embed_dim=EMBED_DIM, out_dim=out_dim, rngs=nnx.Rngs(0), dtype=dtype
    )


@pytest.mark.parametrize("name", sorted(SPECS))
def test_bf16_encoder_is_close_to_f32_with_f32_params(name):
    ids, mask = _tokens()
    f32, bf16 = _encoder(name, "float32"), _encoder(name, "bfloat16")
    assert _param_dtypes(bf16) == {"float32"}
    out32, out16 = f32(ids, mask), bf16(ids, mask)
    assert out16.dtype == jnp.float32
    np.testing.assert_allclose(out16, out32, atol=BF16_ATOL)
    assert not np.array_equal(out16, out32), "bfloat16 compute left no trace"
    if not name.startswith("bow"):  # BOW has no matmul
        assert _matmul_operand_dtypes(bf16, ids, mask) == {"bfloat16"}
        assert _matmul_operand_dtypes(f32, ids, mask) == {"float32"}


def test_unknown_dtype_is_a_clear_error():
    with pytest.raises(ValueError, match=r"config.model.dtype.*'float16'.*bfloat16"):
        _encoder("gru", "float16")
    config = i2ce_coco_margin.get_config("runlocal,embed=16,hidden=32")
    config.model.dtype = "half"
    with pytest.raises(ValueError, match="'half'"):
        i2ce_model.build_model(config, VOCAB)


def _i2ce(dtype: str):
    config = i2ce_coco_margin.get_config("runlocal,embed=16,hidden=32")
    config.model.dtype = dtype
    ids, mask = _tokens()
    batch = {"anchor_ids": ids, "anchor_mask": mask, "group": jnp.arange(BATCH) // 2}
    return config, i2ce_model.build_model(config, VOCAB), i2ce_model.make_loss_fn(config), batch


def _vtfn(dtype: str):
    config = demo_gru.get_config("runlocal,dim=16")
    config.model.dtype = dtype
    ids, mask = _tokens()
    features = jax.random.normal(jax.random.key(1), (BATCH, IMAGE_DIM))
    batch = {"ids": ids, "mask": mask, "features": features, "group": jnp.arange(BATCH)}
    model = vtfn_model.build_model(config, VOCAB, IMAGE_DIM)
    return config, model, vtfn_model.make_loss_fn(config), batch


MODELS = {"i2ce": _i2ce, "vtfn_gru": _vtfn}


@pytest.mark.parametrize("which", sorted(MODELS))
def test_bf16_loss_is_close_to_f32_and_logits_are_f32(which):
    losses = {}
    for dtype in ("float32", "bfloat16"):
        _, model, loss_fn, batch = MODELS[which](dtype)
        model.eval()
        losses[dtype], _ = loss_fn(model, batch, jax.random.key(0))
        assert losses[dtype].dtype == jnp.float32
    np.testing.assert_allclose(
        losses["bfloat16"], losses["float32"], rtol=BF16_LOSS_RTOL, atol=BF16_ATOL
    )
    if which == "i2ce":
        _, model, _, batch = MODELS[which]("bfloat16")
        intrinsic = model.encode(batch["anchor_ids"], batch["anchor_mask"])
        outputs = jnp.zeros((BATCH, LENGTH, intrinsic.shape[-1]), jnp.bfloat16)
        assert model.readout(outputs).dtype == jnp.float32  # the softmax sees float32 logits


@pytest.mark.parametrize("which", sorted(MODELS))
def test_bf16_training_step_is_finite_and_keeps_f32_params(which):
    config, model, loss_fn, batch = MODELS[which]("bfloat16")

    def eval_loss(model) -> float:  # one key and no dropout: only the parameters differ
        model.eval()
        return float(loss_fn(model, batch, jax.random.key(0))[0])

    before = eval_loss(model)
    model.train()
    trainer = Trainer(config, model, loss_fn)
    placed = trainer.global_batch({k: np.asarray(v) for k, v in batch.items()})
    for _ in range(3):
        metrics = trainer.step(placed)
        assert np.isfinite(float(metrics["loss"])), metrics
    trained = trainer.local_model()
    assert _param_dtypes(trained) == {"float32"}
    assert eval_loss(trained) < before  # three steps on one batch move downhill
