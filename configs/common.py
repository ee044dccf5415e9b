"""Pieces shared by the config files: trainer defaults and ``:key=value`` arguments.

A config file is loaded as ``--config=configs/NAME.py:arg``; ``arg`` is a comma
list such as ``loss=kendall,runlocal``. ``parse_arg`` turns it into a
ConfigDict, typed by the defaults the file declares.
"""

from __future__ import annotations

import ml_collections


def parse_arg(arg: str | None, **defaults) -> ml_collections.ConfigDict:
    """Parses ``"a=1,b=x,flag"`` into a ConfigDict typed like ``defaults``.

    A bare name sets a boolean default to True; unknown names raise KeyError
    listing the known ones, so a typo never passes silently.
    """
    result = ml_collections.ConfigDict(defaults)
    for item in filter(None, (arg or "").split(",")):
        key, _, value = item.partition("=")
        if key not in defaults:
            raise KeyError(f"unknown config argument {key!r}; known: {sorted(defaults)}")
        default = defaults[key]
        if not value:
            if not isinstance(default, bool):
                raise ValueError(f"config argument {key!r} needs a value")
            result[key] = True
        elif isinstance(default, bool):
            result[key] = value.lower() in ("1", "true", "yes")
        else:
            result[key] = type(default)(value)
    return result


def trainer_defaults(config: ml_collections.ConfigDict) -> None:
    """Fields of the shared training loop (capsim.train.loop), filled in place."""
    config.seed = 0
    config.batch_size = 128
    config.num_epochs = 4.0
    config.num_steps = -1  # -1: derived from num_epochs and the corpus size
    config.log_every = 50
    config.checkpoint_every = 1000
    config.optimizer = ml_collections.ConfigDict(
        dict(learning_rate=5e-4, decay_rate=1.0, decay_steps=1000, l2=0.0, clip_norm=5.0)
    )
    config.early_stopping = ml_collections.ConfigDict(
        dict(metric="dev/same_image_auc", mode="max", patience=0)
    )


def same_image_eval(every: int) -> dict:
    """The early-stopping evaluation: same-image AUC of dev captions, every ``every`` steps."""
    return dict(type="same_image", split="dev", every=every)


def i2ce_loss(name: str) -> ml_collections.ConfigDict:
    """λ1 (recon_weight) and λ2 (weight) with each branch's pairing and hyperparameters."""
    pairing = "self" if name == "margin" else "similar"
    return ml_collections.ConfigDict(
        dict(
            name=name,
            recon_weight=1.0,
            weight=0.0 if name == "none" else 10.0,
            pairing=pairing,
            margin=0.2,
            reduction="mean",
            temperature=0.05,
            alpha=1.0,
        )
    )


def i2ce_files_config(arg: str | None, loss: str) -> ml_collections.ConfigDict:
    """I2CE on caption files under ``data_dir`` (COCO and Flickr8k train captions).

    Layout under data_dir: ``coco/captions_*.json`` (any COCO caption files) and
    ``flickr8k/`` (Flickr8k.token.txt and the split lists). Flickr8k's test
    images are never trained on. Arguments: data_dir, loss, reduction, weight
    (λ2), epochs, glove ("" | "package" | a glove.*.txt path), embed and hidden
    (sizes), init_std (std of the N(0, std²) word-vector init; 0 for flax's
    default 1/sqrt(embed)), batch, flickr8k (False: COCO captions only, e.g.
    for weights that must not carry Flickr8k's research-only licence), runlocal.
    """
    arg = parse_arg(
        arg,
        data_dir="../shared/data",
        loss=loss,
        reduction="mean",
        weight=-1.0,
        epochs=4.0,
        glove="",
        embed=128,
        hidden=256,
        init_std=1.0,
        batch=128,
        flickr8k=True,
        runlocal=False,
    )
    config = ml_collections.ConfigDict()
    trainer_defaults(config)
    config.batch_size = arg.batch
    config.data = dict(
        source="files",
        data_dir=arg.data_dir,
        coco_captions=("coco/captions_*.json",),
        karpathy="",
        karpathy_splits=("train", "restval"),
        flickr8k_dir="flickr8k" if arg.flickr8k else "",
        flickr8k_splits=("train",),
        dev_images=500,
        max_len=20,
        min_count=5,
        max_vocab=6000,
    )
    embed_dim = 50 if arg.glove else arg.embed
    config.model = dict(
        embed_dim=embed_dim,
        hidden_dim=arg.hidden,
        dropout=0.0,
        glove=arg.glove,
        embed_std=arg.init_std,
    )
    config.loss = i2ce_loss(arg.loss)
    config.loss.reduction = arg.reduction
    if arg.weight >= 0:
        config.loss.weight = arg.weight
    config.num_epochs = arg.epochs
    config.checkpoint_every = 400
    config.early_stopping.patience = 4
    config.scorer = dict(pooling="top-3")
    config.evals = dict(
        dev=same_image_eval(every=200),
        flickr8k_expert=dict(
            type="judgments", set="flickr8k_expert", path=arg.data_dir + "/flickr8k"
        ),
    )
    if arg.runlocal:
        config.num_steps = 10
        config.batch_size = 16
        config.log_every = 5
        config.evals.dev.every = 5
        config.data.dev_images = 50
        del config.evals.flickr8k_expert
    return config


VTFN_ARGS = dict(
    data_dir="../shared/data",
    features="coco_object_labels",
    loss="pearson",
    captions="one",
    lr=1e-3,
    epochs=20.0,
    dim=128,
    glove="",
    pivot=0.0,
    image=1.0,
    select="dev_auc",
    runlocal=False,
)


def vtfn_config(
    arg: str | None, encoder: str, source: str, **overrides
) -> ml_collections.ConfigDict:
    """VTFN (model.kind "vtfn") with ``encoder`` on ``source`` ("files" or "shapes_world").

    Arguments: data_dir; features ("coco_object_labels" or a FeatureStore folder
    written by vtfn_jax.extract_features); loss (any capsim.losses name);
    captions ("one" per image, as in the paper, or "all"); lr; epochs; dim (N);
    glove ("" | "package" | glove.*.txt path; sets the word-vector size to the
    file's); pivot (weight of the caption-pivot loss); image (weight of the
    image loss; 0 with pivot>0 is the CaptionPivot control); select ("dev_auc":
    early stopping on held-out images' same-image AUC, or "avg2016": on STS16
    mean Pearson, the paper's criterion); runlocal.
    """
    arg = parse_arg(arg, **{**VTFN_ARGS, **overrides})
    config = ml_collections.ConfigDict()
    trainer_defaults(config)
    config.data = dict(
        source=source,
        data_dir=arg.data_dir,
        shapes_world=dict(num_scenes=2000, seed=0),
        coco_captions=("coco/captions_*.json",),
        karpathy="",
        karpathy_splits=("train", "restval"),
        flickr8k_dir="",
        flickr8k_splits=("train",),
        features=arg.features,
        object_labels="coco/val2014_object_labels.json",
        object_labels_idf=True,
        pca_dim=0,
        captions_per_image=arg.captions,
        dev_images=250,
        test_images=500,
        max_len=24,
        min_count=2,
        max_vocab=0,
    )
    word_dim = 50 if arg.glove else arg.dim
    config.model = dict(
        kind="vtfn",
        encoder=encoder,
        dim=arg.dim if not (arg.glove and encoder.startswith("bow")) else word_dim,
        embed_dim=word_dim,
        glove=arg.glove,
        dropout=0.0 if encoder.startswith("bow") else 0.2,
        cnn_widths=(1, 2, 3),
        cnn_features=128,
        cnn_pooling="max",
    )
    config.loss = dict(
        name=arg.loss,
        image_weight=arg.image,
        pivot_weight=arg.pivot,
        margin=0.2,
        reduction="mean",
        alpha=5.0,
        temperature=0.05,
    )
    config.num_epochs = arg.epochs
    config.optimizer.learning_rate = arg.lr
    config.optimizer.decay_rate = 0.5
    config.optimizer.decay_steps = 2000
    config.optimizer.l2 = 1e-6
    config.checkpoint_every = 500
    config.early_stopping.patience = 5
    config.evals = dict(
        dev=same_image_eval(every=100),
        same_diff=dict(type="same_diff", split="test"),
        retrieval=dict(type="retrieval", split="test"),
    )
    if source == "files":
        config.evals.sts = dict(type="sts", sts_dir=arg.data_dir + "/sts")
    else:
        config.evals.shapes = dict(type="shapes")
    if arg.select == "avg2016":  # the paper's model selection: mean Pearson on STS 2016
        config.evals.sts16 = dict(
            type="sts", sts_dir=arg.data_dir + "/sts", years=("STS16",), every=100
        )
        config.early_stopping.metric = "sts16/avg2016"
    elif arg.select != "dev_auc":
        raise ValueError(f"select must be 'dev_auc' or 'avg2016', got {arg.select!r}")
    if arg.runlocal:
        config.data.shapes_world.num_scenes = 200
        config.data.dev_images = 50
        config.data.test_images = 50
        config.num_steps = 10
        config.batch_size = 16
        config.log_every = 5
        for entry in config.evals.values():
            entry.every = 5 if entry.get("every") else 0
    return config


# The data arguments every baseline shares with VTFN (so splits and evaluation sets match).
BASELINE_DATA_ARGS = ("data_dir", "features", "captions", "runlocal")
_LANGUAGE_MODEL_ARGS = dict(
    lr=VTFN_ARGS["lr"], epochs=VTFN_ARGS["epochs"], dim=VTFN_ARGS["dim"], glove=""
)
BASELINE_ARGS = {
    "glove_avg": dict(glove="package", restricted=True),
    "word2vec": dict(
        dim=VTFN_ARGS["dim"],
        algorithm="skipgram",
        w2v_epochs=10,
        w2v_min_count=2,
        extra_flickr8k="",
    ),
    "pure_text_rnn": _LANGUAGE_MODEL_ARGS,
    "pin_model_a": _LANGUAGE_MODEL_ARGS,
}
GLOVE_PACKAGE_DIM = 50
W2V_RUNLOCAL_EPOCHS = 2
LANGUAGE_MODEL_DROPOUT = 0.2


def baseline_config(
    arg: str | None, kind: str, source: str, **overrides
) -> ml_collections.ConfigDict:
    """A VTFN-paper baseline (``vtfn_jax.baselines.KINDS``) with VTFN's data and eval keys.

    Shared arguments: data_dir, features, captions, runlocal (as for VTFN) and
    source ("files" | "shapes_world", default ``source``). ``captions`` sets the
    vocabulary and the language models' training captions as for VTFN; word2vec
    always reads every caption of the training images. Per kind:
      glove_avg      glove ("package" | glove.*.txt path), restricted (R: training vocabulary only)
      word2vec       dim, algorithm ("skipgram" | "cbow"), w2v_epochs, w2v_min_count,
                     extra_flickr8k (a Flickr8k folder under data_dir: its train captions are added)
      pure_text_rnn, pin_model_a   lr, epochs, dim (GRU state = sentence vector), glove (word init)
    Only ``config.model`` differs from VTFN's config (and there is no ``config.loss``).
    """
    if kind not in BASELINE_ARGS:
        raise KeyError(f"unknown baseline kind {kind!r}; known: {sorted(BASELINE_ARGS)}")
    defaults = {
        **{key: VTFN_ARGS[key] for key in BASELINE_DATA_ARGS},
        "source": source,
        **BASELINE_ARGS[kind],
    }
    unknown = sorted(set(overrides) - set(defaults))
    if unknown:
        raise KeyError(
            f"unknown overrides {unknown} for baseline {kind!r}; known: {sorted(defaults)}"
        )
    arg = parse_arg(arg, **{**defaults, **overrides})
    shared = {key: value for key, value in arg.to_dict().items() if key in VTFN_ARGS}
    config = vtfn_config(None, encoder="gru", source=arg.source, **shared)
    del config.loss
    model = dict(kind=kind)
    if kind == "glove_avg":
        model.update(glove=arg.glove, restricted=arg.restricted, dim=GLOVE_PACKAGE_DIM)
    elif kind == "word2vec":
        model.update(
            dim=arg.dim,
            w2v_algorithm=arg.algorithm,
            w2v_epochs=W2V_RUNLOCAL_EPOCHS if arg.runlocal else arg.w2v_epochs,
            w2v_min_count=arg.w2v_min_count,
            extra_captions=dict(
                coco_captions=(),
                karpathy="",
                karpathy_splits=("train", "restval"),
                flickr8k_dir=arg.extra_flickr8k,
                flickr8k_splits=("train",),
            ),
        )
    else:
        model.update(
            dim=arg.dim,
            embed_dim=GLOVE_PACKAGE_DIM if arg.glove else arg.dim,
            glove=arg.glove,
            dropout=LANGUAGE_MODEL_DROPOUT,
        )
        config.evals.dev_perplexity = dict(
            type="perplexity", split="dev", every=config.evals.dev.every
        )
    config.model = model
    return config
