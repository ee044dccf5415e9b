"""PyTorch twins of VTFN (BOW, GRU, LSTM, CNN) and the I2CE autoencoder, for the throughput bench.

Each twin has the library model's sizes, parameters and loss, read from the same
ConfigDict, so "examples/s against PyTorch" compares one model in two frameworks.
Module names follow the Flax modules (``text.embed``, ``encoder.cell``, ``readout``...)
so ``copy_flax_params`` can load a Flax model's weights and the two losses can be
checked equal. torch is never a dependency of the library: only bench/ imports it.

Every twin takes a ``device`` ("cpu" by default, "cuda" for a GPU) and builds its
parameters there; the losses make their own tensors on the device of their inputs,
and ``TorchTrainer`` moves each batch to its model's device. Nothing relies on
torch's global default device.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import torch
import torch.nn.functional as F
from flax import nnx, traverse_util
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

Batch = Mapping[str, torch.Tensor]
Device = str | torch.device

NORM_EPS = 1e-8  # capsim.encoders.NORM_EPS and capsim.losses.DEFAULT_EPS
RNN_TYPES: dict[str, type[nn.GRU | nn.LSTM]] = {"gru": nn.GRU, "lstm": nn.LSTM}
# Flax's GRUCell biases its input projection, its OptimizedLSTMCell the hidden one.
UNUSED_BIAS = {nn.GRU: "bias_hh_l0", nn.LSTM: "bias_ih_l0"}

# torch's padding="same" pads an even width's extra position on the right, as flax's "SAME"
# does; the padded copy it warns about is part of what the twin costs, as it is for users.
warnings.filterwarnings("ignore", message="Using padding='same' with even kernel lengths")


def flax_style_rnn(rnn_type: type[nn.GRU | nn.LSTM], input_size: int, hidden_size: int):
    """A batch-first nn.GRU or nn.LSTM computing Flax's GRUCell or OptimizedLSTMCell.

    Flax's cells have one bias per gate; torch has a second (UNUSED_BIAS). Turning it
    into a zero buffer gives the same function and the same parameter count.
    """
    rnn = rnn_type(input_size, hidden_size, batch_first=True)
    name = UNUSED_BIAS[rnn_type]
    zeros = torch.zeros_like(getattr(rnn, name), requires_grad=False)
    delattr(rnn, name)
    rnn.register_buffer(name, zeros)
    return rnn


def final_state(rnn: nn.GRU | nn.LSTM, inputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The hidden state [B, H] after each caption's last real token (packed, so PAD never runs)."""
    lengths = mask.sum(dim=1).cpu()
    packed = pack_padded_sequence(inputs, lengths, batch_first=True, enforce_sorted=False)
    _, state = rnn(packed)
    hidden = state[0] if isinstance(rnn, nn.LSTM) else state  # an LSTM's state is (h, c)
    return hidden[0]


def unit_rows(x: torch.Tensor) -> torch.Tensor:
    """Rows divided by max(norm, eps), as capsim does (a zero row stays zero)."""
    return x / torch.sqrt(torch.clamp((x * x).sum(-1, keepdim=True), min=NORM_EPS * NORM_EPS))


def cosine_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return unit_rows(a) @ unit_rows(b).T


def pearson_pair_loss(
    sim: torch.Tensor, positive: torch.Tensor, perm: torch.Tensor
) -> torch.Tensor:
    """-Pearson r of [diag, permuted pairs] with labels [+1, ±1] (capsim.losses "pearson")."""
    rows = torch.arange(sim.shape[0], device=sim.device)
    perm = perm.to(sim.device)
    x = torch.cat([sim.diagonal(), sim[rows, perm]])
    y = torch.cat(
        [torch.ones(sim.shape[0], device=sim.device), positive[rows, perm].float() * 2.0 - 1.0]
    )
    xc, yc = x - x.mean(), y - y.mean()
    floor = NORM_EPS * NORM_EPS
    x_std = torch.sqrt(torch.clamp((xc * xc).mean(), min=floor))
    y_std = torch.sqrt(torch.clamp((yc * yc).mean(), min=floor))
    return -(xc * yc).mean() / (x_std * y_std)


def margin_mean_loss(sim: torch.Tensor, positive: torch.Tensor, margin: float) -> torch.Tensor:
    """Mean of max(0, margin - (1 - sim)) over in-batch negatives (capsim.losses "margin", mean)."""
    eye = torch.eye(sim.shape[0], dtype=torch.bool, device=sim.device)
    negative = (~positive & ~eye).float()
    hinge = torch.relu(margin - (1.0 - sim))
    return (hinge * negative).sum() / torch.clamp(negative.sum(), min=1.0)


def same_group(batch: Batch) -> torch.Tensor:
    return batch["group"][:, None] == batch["group"][None, :]


class BowText(nn.Module):
    """L2-normalised masked sum of word vectors (EmbeddingBag, PAD weighted 0)."""

    def __init__(self, vocab_size: int, dim: int):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab_size, dim, mode="sum")

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return unit_rows(self.embed(ids, per_sample_weights=mask.float()))


class RnnText(nn.Module):
    """Embedding, dropout, GRU or LSTM; the final state at each caption's true length."""

    def __init__(
        self,
        rnn_type: type[nn.GRU | nn.LSTM],
        vocab_size: int,
        embed_dim: int,
        hidden_dim: int,
        dropout: float,
    ):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_dim)
        self.dropout = nn.Dropout(dropout)
        self.cell = flax_style_rnn(rnn_type, embed_dim, hidden_dim)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return final_state(self.cell, self.dropout(self.embed(ids)), mask)


class CnnText(nn.Module):
    """PAD-zeroed word vectors, a ReLU convolution per width, max over real positions, dense."""

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        widths: Sequence[int],
        features: int,
        out_dim: int,
        dropout: float,
    ):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_dim)
        self.convs = nn.ModuleList(
            nn.Conv1d(embed_dim, features, width, padding="same") for width in widths
        )
        self.dropout = nn.Dropout(dropout)
        self.dense = nn.Linear(features * len(widths), out_dim)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        vectors = (self.embed(ids) * mask[..., None]).transpose(1, 2)  # [B, E, L]
        pad = ~mask[:, None, :]
        # ReLU maps are >= 0, so filling PAD with 0 keeps the max over real positions
        # (and gives 0 for a caption with none, as capsim's -inf masking does).
        pooled = [
            torch.relu(conv(vectors)).masked_fill(pad, 0.0).amax(dim=2) for conv in self.convs
        ]
        return self.dense(self.dropout(torch.cat(pooled, dim=1)))


class VTFNReference(nn.Module):
    """Text tower plus the affine image map, trained with the Pearson pair loss."""

    def __init__(self, config, vocab_size: int, image_dim: int, device: Device = "cpu"):
        super().__init__()
        model = config.model
        if config.loss.name != "pearson" or config.loss.pivot_weight:
            raise ValueError("the torch VTFN reference implements the Pearson image loss only")
        self.image_weight = config.loss.image_weight
        encoder = model.encoder
        if encoder.kind == "bow_sum":
            self.text = BowText(vocab_size, model.dim)
        elif encoder.kind in RNN_TYPES:
            self.text = RnnText(
                RNN_TYPES[encoder.kind], vocab_size, model.embed_dim, model.dim, encoder.dropout
            )
        elif encoder.kind == "cnn" and encoder.pooling == "max":
            self.text = CnnText(
                vocab_size,
                model.embed_dim,
                encoder.widths,
                encoder.features,
                model.dim,
                encoder.dropout,
            )
        else:
            raise ValueError(f"no torch reference for encoder {encoder.kind!r} (CNN: max pooling)")
        self.image_map = nn.Linear(image_dim, model.dim)
        self.to(device)

    def loss(self, batch: Batch, perm: torch.Tensor) -> torch.Tensor:
        text = self.text(batch["ids"], batch["mask"])
        sim = cosine_matrix(text, self.image_map(batch["features"]))
        return self.image_weight * pearson_pair_loss(sim, same_group(batch), perm)


def sequence_nll(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """NLL of ``targets`` [B, T] under ``logits`` [B, T, V]: summed over real tokens, mean over B."""
    token_nll = F.cross_entropy(
        logits.flatten(0, 1), targets.flatten().long(), reduction="none"
    ).view(targets.shape)
    return (token_nll * mask.float()).sum(dim=1).mean()


class I2CEReference(nn.Module):
    """GRU autoencoder: summed masked NLL with teacher forcing, plus λ2 · margin over the batch."""

    def __init__(self, config, vocab_size: int, device: Device = "cpu"):
        super().__init__()
        model, loss = config.model, config.loss
        if loss.name not in ("none", "margin") or loss.reduction != "mean":
            raise ValueError("the torch I2CE reference implements recon and margin (mean) only")
        self.encoder = RnnText(nn.GRU, vocab_size, model.embed_dim, model.hidden_dim, model.dropout)
        self.decoder_cell = flax_style_rnn(nn.GRU, model.embed_dim, model.hidden_dim)
        self.readout = nn.Linear(model.hidden_dim, vocab_size)
        self.recon_weight = loss.recon_weight
        self.margin_weight = 0.0 if loss.name == "none" else loss.weight
        self.margin = loss.margin
        self.to(device)

    def reconstruction_nll(
        self, ids: torch.Tensor, mask: torch.Tensor, intrinsic: torch.Tensor
    ) -> torch.Tensor:
        """Reads <S> w1..wn, predicts w1..wn </S>; padded steps run but are masked out of the sum."""
        outputs, _ = self.decoder_cell(self.encoder.embed(ids[:, :-1]), intrinsic[None])
        return sequence_nll(self.readout(outputs), ids[:, 1:], mask[:, 1:])

    def loss(self, batch: Batch, perm: torch.Tensor) -> torch.Tensor:
        del perm  # the margin branch uses every in-batch negative
        ids, mask = batch["anchor_ids"], batch["anchor_mask"]
        anchor = self.encoder(ids, mask)
        total = self.recon_weight * self.reconstruction_nll(ids, mask, anchor)
        if self.margin_weight:
            sim = cosine_matrix(anchor, anchor)
            total = total + self.margin_weight * margin_mean_loss(
                sim, same_group(batch), self.margin
            )
        return total


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def copy_flax_params(model: nn.Module, flax_params: Mapping[str, np.ndarray]) -> None:
    """Loads Flax weights given as dotted paths (``text.cell.dense_i.kernel`` ...) into ``model``.

    Kernels reverse their axes: Linear [in, out] is torch's [out, in], Conv
    [width, in, out] is Conv1d's [out, in, width]. An RNN cell's dense_i/dense_h are
    torch's weight_ih/weight_hh with the same gate order (GRU r, z, n; LSTM i, f, g, o)
    and each cell's one bias (flax_style_rnn). Every torch parameter is written once.
    """
    renames = {
        "dense_i.kernel": "weight_ih_l0",
        "dense_i.bias": "bias_ih_l0",
        "dense_h.kernel": "weight_hh_l0",
        "dense_h.bias": "bias_hh_l0",
        "embedding": "weight",
        "kernel": "weight",
        "bias": "bias",
    }
    params = dict(model.named_parameters())
    written = set()
    with torch.no_grad():
        for path, value in flax_params.items():
            suffix = next((s for s in renames if path.endswith(s)), None)
            if suffix is None:
                raise ValueError(f"no torch counterpart for Flax parameter {path!r}")
            name = path[: -len(suffix)] + renames[suffix]
            array = np.asarray(value, np.float32)
            if suffix.endswith("kernel"):
                array = array.T
            params[name].copy_(torch.tensor(array))
            written.add(name)
    missing = sorted(set(params) - written)
    if missing:
        raise ValueError(f"Flax parameters left torch parameters {missing} unset")


def flax_params(model: nnx.Module) -> dict[str, np.ndarray]:
    """The model's parameters as dotted paths, e.g. ``text.cell.dense_i.kernel``."""
    pure = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    flat = traverse_util.flatten_dict(pure)  # paths hold ints for nnx.List items (CNN convs)
    return {".".join(map(str, k)): np.asarray(v) for k, v in flat.items()}


def twin_of(
    config: ml_collections.ConfigDict,
    model: nnx.Module,
    vocab_size: int,
    image_dim: int | None = None,
    device: Device = "cpu",
) -> nn.Module:
    """``model``'s twin on ``device`` holding its current weights: VTFN's with ``image_dim``,
    else I2CE's."""
    if image_dim is None:
        twin = I2CEReference(config, vocab_size, device=device)
    else:
        twin = VTFNReference(config, vocab_size, image_dim, device=device)
    copy_flax_params(twin, flax_params(model))
    return twin


def initial_losses(
    model: nnx.Module,
    loss_fn,
    twin: nn.Module,
    batch: Mapping[str, np.ndarray],
    device: Device = "cpu",
) -> tuple[float, float]:
    """Both losses on ``batch`` before training, dropout off and the same permutation."""
    key = jax.random.key(0)
    perm = np.array(jax.random.permutation(key, len(batch["group"])))  # a writable copy
    model.eval()
    jax_loss, _ = nnx.jit(loss_fn)(model, {k: jnp.asarray(v) for k, v in batch.items()}, key)
    model.train()
    twin.eval()
    with torch.no_grad():
        tensors = {k: torch.as_tensor(v, device=device) for k, v in batch.items()}
        torch_loss = twin.loss(tensors, torch.as_tensor(perm, dtype=torch.long, device=device))
    return float(jax_loss), float(torch_loss)


class TorchTrainer:
    """The library's optimizer in torch: clip by global norm, coupled L2, Adam, exponential decay.

    It trains on its model's device (``device``, read from the parameters): batches move
    there, and the permutations come from a CPU generator, the same on every device.
    """

    def __init__(self, model: nn.Module, config, seed: int = 0):
        opt = config.optimizer
        self.model = model
        self.params = list(model.parameters())
        self.device = self.params[0].device
        self.clip_norm = opt.clip_norm or float("inf")
        self.optimizer = torch.optim.Adam(self.params, lr=opt.learning_rate, weight_decay=opt.l2)
        decay_steps = max(opt.decay_steps, 1)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: opt.decay_rate ** (step / decay_steps)
        )
        self.generator = torch.Generator().manual_seed(seed)

    def to_device(self, batch: Mapping[str, np.ndarray | torch.Tensor]) -> dict[str, torch.Tensor]:
        """A batch's arrays as tensors on the model's device (host arrays are copied there)."""
        return {k: torch.as_tensor(v, device=self.device) for k, v in batch.items()}

    def step(self, batch: Mapping[str, np.ndarray | torch.Tensor]) -> torch.Tensor:
        """One optimisation step on a host batch (or one ``to_device`` placed); returns the
        loss, without waiting for the device."""
        tensors = self.to_device(batch)
        perm = torch.randperm(len(tensors["group"]), generator=self.generator)
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.model.loss(tensors, perm)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, self.clip_norm)
        self.optimizer.step()
        self.schedule.step()
        return loss.detach()
