"""I2CE's config pieces: its options, the COCO run, the autoencoder and the loss branches.
Numbers come from the experiment files.

Options (i2ce_jax.config_lib.OPTIONS): data_dir; reduction (the margin
branch's ``mean`` or ``max`` over negatives); weight (λ2; -1: 10, or 0 for
reconstruction only); glove ("" | "package" | a glove.*.txt path: 50-d word
vectors start from GloVe); flickr8k (False: COCO captions only, e.g. for weights
that must not carry Flickr8k's research-only licence); states (the intrinsic
vector: the ``last`` GRU state, as the paper, or the ``mean`` of the states);
bidir (a bidirectional GRU: two directions of ``hidden / 2`` each, concatenated);
sources (``+``-joined names of capsim.data.sources.SOURCES, e.g.
``coco+coco_lines+cc3m`` or ``coco_tfds``; replaces the default ``coco`` and
``flickr8k``, merges overlaps and holds out one dev split per ``dev_sets``
domain); dev_sets (``coco+flickr``, or ``coco_tfds`` for the TFDS copy's
Karpathy val images; empty: dev images drawn from the training captions);
tfds_data_dir (where a prepared TFDS ``coco_captions`` lives: a folder or a
bucket path, "" for TFDS's default); buckets (data.length_buckets: length-bucketed batches);
clusters (data.topic_clusters: batches in runs of that many captions sharing a
content word, i.e. hard in-batch negatives; 0 off); contrast (loss.contrast: each
anchor with one colour, number or object word swapped is a negative of its own in the
InfoNCE branch, i2ce_jax.data.WordSwaps);
runlocal (a few steps on little data).
"""

from __future__ import annotations

import ml_collections

from capsim import config_lib as common

# The options every I2CE COCO file takes beside its own numbers (see ``run``).
OPTIONS = dict(
    data_dir="../shared/data",
    reduction="mean",
    weight=-1.0,
    glove="",
    flickr8k=True,
    states="last",
    bidir=False,
    sources="",
    dev_sets="coco+flickr",
    tfds_data_dir="",
    buckets=0,
    clusters=0,
    contrast=False,
    runlocal=False,
)
GLOVE_PACKAGE_DIM = 50


def run(arg: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """Trainer, data and evaluations of I2CE on caption sources under ``data_dir``.

    The file's own numbers are read from ``arg``: batch, epochs, lr, decay,
    decay_steps, l2 and eval_every (the dev evaluation's cadence). Sources:
    ``coco`` (any ``coco/captions_*.json``) and ``flickr8k`` (Flickr8k.token.txt
    and the split lists; train split only, the test images are refused), or the
    named ``sources``. 500 images are held out for early stopping; Flickr8k-Expert is reported at the end when its files are under
    ``data_dir/flickr8k``.
    """
    config = common.trainer(arg, checkpoint_every=400, patience=4)
    if arg.sources:
        names, dev_sets = common.plus_joined(arg.sources), common.plus_joined(arg.dev_sets)
    else:
        names, dev_sets = ("coco", "flickr8k") if arg.flickr8k else ("coco",), ()
    config.data = common.caption_sources(arg.data_dir, names, dev_sets, arg.tfds_data_dir)
    dev = common.same_image_eval(every=arg.eval_every)
    if dev_sets:
        dev["split"] = tuple(f"dev_{name}" for name in dev_sets)
    config.data.update(
        dev_images=500,
        max_len=20,
        min_count=5,
        max_vocab=6000,
        length_buckets=arg.buckets,
        topic_clusters=arg.clusters,
    )
    config.scorer = dict(pooling="top-3")
    config.evals = dict(
        dev=dev,
        flickr8k_expert=dict(
            type="judgments", set="flickr8k_expert", path=arg.data_dir + "/flickr8k"
        ),
    )
    return config


def finish(config: ml_collections.ConfigDict, arg: ml_collections.ConfigDict):
    """The config as it is, or shrunk to a few steps on little data with ``runlocal``."""
    if arg.runlocal:
        del config.evals.flickr8k_expert
        common.shrink_for_runlocal(config)
    return config


def autoencoder(arg: ml_collections.ConfigDict) -> dict:
    """The GRU autoencoder: ``embed``-d word vectors from N(0, ``init_std``²) (GloVe's 50-d
    when ``glove`` is set; ``init_std`` 0: flax's 1/sqrt(embed)) and a ``hidden`` GRU."""
    return dict(
        embed_dim=GLOVE_PACKAGE_DIM if arg.glove else arg.embed,
        hidden_dim=arg.hidden,
        dropout=0.0,
        glove=arg.glove,
        embed_std=arg.init_std,
        state_pooling=arg.states,  # the intrinsic vector: "last" GRU state (paper) or "mean"
        bidirectional=arg.bidir,  # the paper's GRU reads left to right only
        dtype="float32",  # compute dtype; "bfloat16" on GPU/TPU (parameters stay float32)
        logits_dtype="float32",  # or the compute dtype: the readout's output (I2CEAutoencoder)
        decoder_unroll=1,  # decoder steps per time-loop iteration (1: rolled)
    )


def branch(
    name: str, reduction: str = "mean", weight: float = -1.0, contrast: bool = False
) -> ml_collections.ConfigDict:
    """λ1 (recon_weight), λ2 (weight; default 10, 0 for "none") and each branch's pairing.

    "none" is reconstruction only (one branch); "margin" compares each caption with
    the other captions of the batch (two branches, ``reduction`` mean or max);
    "triplet" and "infonce" with a second caption of the same image (three branches).
    """
    return ml_collections.ConfigDict(
        dict(
            name=name,
            recon_weight=1.0,
            weight=weight if weight >= 0 else (0.0 if name == "none" else 10.0),
            pairing="self" if name == "margin" else "similar",
            margin=0.2,
            reduction=reduction,
            temperature=0.05,
            alpha=1.0,
            contrast=contrast,  # a word-swapped anchor as each row's own negative (infonce)
        )
    )
