"""I2CE's config pieces: its arguments, the COCO run, the autoencoder and the loss branches."""

from __future__ import annotations

import ml_collections

from configs import common

# The settled recipe (bench/RESULTS.md): 300/512, N(0, 1) word vectors, up to 8 epochs.
COCO_ARGS = dict(
    data_dir="../shared/data",
    reduction="mean",
    weight=-1.0,
    epochs=8.0,
    glove="",
    embed=300,
    hidden=512,
    init_std=1.0,
    batch=128,
    flickr8k=True,
    states="last",
    sources="",
    dev_sets="coco+flickr",
    buckets=0,
    runlocal=False,
)


def parse(arg: str | None, loss: str, **defaults) -> ml_collections.ConfigDict:
    """Arguments of the COCO configs: data_dir, loss, reduction, weight (λ2), epochs,
    glove ("" | "package" | a glove.*.txt path), embed and hidden (sizes), init_std
    (std of the N(0, std²) word-vector init; 0 for flax's 1/sqrt(embed)), batch,
    flickr8k (False: COCO captions only, e.g. for weights that must not carry
    Flickr8k's research-only licence), states (the intrinsic vector: ``last`` GRU state,
    as the paper, or the ``mean`` of the states), sources (``+``-joined names of
    capsim.data.sources.SOURCES, e.g. ``coco+coco_lines+cc3m``; replaces the COCO
    files and ``flickr8k``, merges overlaps and holds out one dev split per
    ``dev_sets`` domain), dev_sets (``coco+flickr``), buckets (data.length_buckets),
    runlocal."""
    return common.parse_arg(arg, **{**COCO_ARGS, "loss": loss, **defaults})


def coco_run(
    arg: str | None, loss: str
) -> tuple[ml_collections.ConfigDict, ml_collections.ConfigDict]:
    """(config with trainer, data and evaluations; the parsed arguments, see ``parse``)."""
    parsed = parse(arg, loss)
    return coco_run_parsed(parsed), parsed


def coco_run_parsed(arg: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """Trainer, data and evaluations of I2CE on caption files under ``data_dir``.

    Layout: ``coco/captions_*.json`` (any COCO caption files) and ``flickr8k/``
    (Flickr8k.token.txt and the split lists; train split only, the test images
    are refused). 500 images are held out for early stopping; Flickr8k-Expert is
    reported at the end when its files are under ``data_dir/flickr8k``.
    """
    config = ml_collections.ConfigDict()
    common.trainer_defaults(config)
    config.batch_size = arg.batch
    config.num_epochs = arg.epochs
    config.checkpoint_every = 400
    config.early_stopping.patience = 4
    if arg.sources:
        dev_sets = tuple(filter(None, arg.dev_sets.split("+")))
        config.data = dict(
            source="files",
            data_dir=arg.data_dir,
            sources=tuple(arg.sources.split("+")),
            dev_sets=dev_sets,
        )
        dev = dict(type="same_image", split=tuple(f"dev_{name}" for name in dev_sets), every=200)
    else:
        config.data = common.caption_files(arg.data_dir, "flickr8k" if arg.flickr8k else "")
        dev = common.same_image_eval(every=200)
    config.data.update(
        dev_images=500, max_len=20, min_count=5, max_vocab=6000, length_buckets=arg.buckets
    )
    config.scorer = dict(pooling="top-3")
    config.evals = dict(
        dev=dev,
        flickr8k_expert=dict(
            type="judgments", set="flickr8k_expert", path=arg.data_dir + "/flickr8k"
        ),
    )
    if arg.runlocal:
        del config.evals.flickr8k_expert
        common.shrink_for_runlocal(config)
    return config


def autoencoder(arg: ml_collections.ConfigDict) -> dict:
    """The GRU autoencoder: word vectors (GloVe's 50-d when ``glove`` is set) and hidden size."""
    return dict(
        embed_dim=50 if arg.glove else arg.embed,
        hidden_dim=arg.hidden,
        dropout=0.0,
        glove=arg.glove,
        embed_std=arg.init_std,
        state_pooling=arg.states,  # the intrinsic vector: "last" GRU state (paper) or "mean"
        dtype="float32",  # compute dtype; "bfloat16" on GPU/TPU (parameters stay float32)
    )


def branch(name: str, reduction: str = "mean", weight: float = -1.0) -> ml_collections.ConfigDict:
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
        )
    )


def coco_config(arg: str | None, loss: str) -> ml_collections.ConfigDict:
    """The whole COCO config in one call (sweeps and benches; the experiment files spell it out)."""
    config, parsed = coco_run(arg, loss)
    config.model = autoencoder(parsed)
    config.loss = branch(parsed.loss, parsed.reduction, parsed.weight)
    return config
