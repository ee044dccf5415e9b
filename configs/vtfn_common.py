"""VTFN's config pieces: its arguments, the run (data, trainer, evaluations), the text
tower, the loss, and the baselines of the paper as a registry of model builders."""

from __future__ import annotations

import ml_collections

from configs import common

VTFN_ARGS = dict(
    data_dir="../shared/data",
    features="coco_object_labels",
    loss="pearson",
    captions="one",
    lr=1e-3,
    decay=0.5,
    decay_steps=2000,
    l2=1e-6,
    epochs=20.0,
    dim=128,
    pca=0,
    fraction=1.0,
    glove="",
    glove_words=-1,
    frozen_words=False,
    pivot=0.0,
    image=1.0,
    select="dev_auc",
    runlocal=False,
)


def parse(arg: str | None, **overrides) -> ml_collections.ConfigDict:
    """Arguments: data_dir; features ("coco_object_labels" or a FeatureStore folder
    written by vtfn_jax.extract_features); loss (any capsim.losses name); captions
    ("one" per image, as in the paper, or "all"); lr, decay (its factor every
    decay_steps) and l2 (Adam's coupled L2); epochs; dim (N); pca (image
    features reduced to this many components, 0: none); fraction (of the
    training images kept, nested across fractions: the data-scale curve); glove
    ("" | "package" | glove.*.txt path; sets the word-vector size to the
    file's); glove_words (with glove: the vocabulary is the captions' words plus
    GloVe's first glove_words words by rank, -1 all of them, so words only
    evaluation text uses keep their GloVe vector); frozen_words (word vectors
    left untrained, e.g. GloVe's, while the rest of the tower learns); pivot
    (weight of the caption-pivot loss); image (weight of the image loss; 0 with
    pivot>0 is the CaptionPivot control); select ("dev_auc": early stopping on
    held-out images' same-image AUC, or "avg2016": on STS16 mean Pearson, the
    paper's criterion); runlocal. ``overrides`` change the defaults."""
    return common.parse_arg(arg, **{**VTFN_ARGS, **overrides})


def run(
    arg: str | None, source: str, **overrides
) -> tuple[ml_collections.ConfigDict, ml_collections.ConfigDict]:
    """(config with data, trainer and evaluations; the parsed arguments) of a run on ``source``."""
    parsed = parse(arg, **overrides)
    return run_parsed(parsed, source), parsed


def run_parsed(arg: ml_collections.ConfigDict, source: str) -> ml_collections.ConfigDict:
    """Data, trainer and evaluations of a VTFN-paper run on ``source``.

    "files": COCO captions with ``features`` (250 dev and 500 test images held
    out), reported on same/different pairs, retrieval and STS 2012-2016.
    "shapes_world": the embedded world, reported on its own pairs too.
    """
    config = ml_collections.ConfigDict()
    common.trainer_defaults(config)
    config.num_epochs = arg.epochs
    config.optimizer.update(
        learning_rate=arg.lr, decay_rate=arg.decay, decay_steps=arg.decay_steps, l2=arg.l2
    )
    config.optimizer.frozen = ("embed",) if arg.frozen_words else ()
    config.checkpoint_every = 500
    config.early_stopping.patience = 5
    config.data = common.caption_files(arg.data_dir)
    config.data.update(
        source=source,
        shapes_world=dict(num_scenes=2000, seed=0),
        features=arg.features,
        object_labels="coco/val2014_object_labels.json",
        object_labels_idf=True,
        pca_dim=arg.pca,
        train_fraction=arg.fraction,
        captions_per_image=arg.captions,
        dev_images=250,
        test_images=500,
        max_len=24,
        length_buckets=0,  # >0: length-bucketed batches, widths rounded to this multiple
        min_count=2,
        max_vocab=0,
    )
    config.evals = dict(
        dev=common.same_image_eval(every=100),
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
    return common.shrink_for_runlocal(config) if arg.runlocal else config


def text_tower(arg: ml_collections.ConfigDict, encoder: str) -> dict:
    """VTFN's model: the ``encoder`` text tower (N = ``dim``) and the affine image map W."""
    word_dim = 50 if arg.glove else arg.dim
    return dict(
        kind="vtfn",
        encoder=encoder,
        dim=word_dim if (arg.glove and encoder.startswith("bow")) else arg.dim,
        embed_dim=word_dim,
        glove=arg.glove,
        glove_words=arg.glove_words if arg.glove else 0,
        dropout=0.0 if encoder.startswith("bow") else 0.2,
        cnn_widths=(1, 2, 3),
        cnn_features=128,
        cnn_pooling="max",
        dtype="float32",  # compute dtype; "bfloat16" on GPU/TPU (parameters stay float32)
    )


def loss(arg: ml_collections.ConfigDict) -> dict:
    """The alignment loss (``loss``) with the image and caption-pivot weights."""
    return dict(
        name=arg.loss,
        image_weight=arg.image,
        pivot_weight=arg.pivot,
        margin=0.2,
        reduction="mean",
        alpha=5.0,
        temperature=0.05,
    )


def vtfn_config(
    arg: str | None, encoder: str, source: str, **overrides
) -> ml_collections.ConfigDict:
    """The whole VTFN config in one call (sweeps and benches; experiment files spell it out)."""
    config, parsed = run(arg, source, **overrides)
    config.model = text_tower(parsed, encoder)
    config.loss = loss(parsed)
    return config


# --------------------------------------------------------------------------- baselines
# Every baseline shares VTFN's data and evaluation arguments, so splits and sets match.
BASELINE_DATA_ARGS = ("data_dir", "features", "captions", "fraction", "runlocal")
GLOVE_PACKAGE_DIM = 50
W2V_RUNLOCAL_EPOCHS = 2
LANGUAGE_MODEL_DROPOUT = 0.2
_LANGUAGE_MODEL_ARGS = dict(
    lr=VTFN_ARGS["lr"], epochs=VTFN_ARGS["epochs"], dim=VTFN_ARGS["dim"], glove=""
)


def _glove_average(config: ml_collections.ConfigDict, arg: ml_collections.ConfigDict) -> None:
    config.model = dict(
        kind="glove_avg", glove=arg.glove, restricted=arg.restricted, dim=GLOVE_PACKAGE_DIM
    )


def _word2vec(config: ml_collections.ConfigDict, arg: ml_collections.ConfigDict) -> None:
    config.model = dict(
        kind="word2vec",
        dim=arg.dim,
        w2v_algorithm=arg.algorithm,
        w2v_epochs=W2V_RUNLOCAL_EPOCHS if arg.runlocal else arg.w2v_epochs,
        w2v_min_count=arg.w2v_min_count,
        extra_captions=dict(  # read under data_dir: Flickr8k train captions, when named
            coco_captions=(),
            karpathy="",
            karpathy_splits=("train", "restval"),
            flickr8k_dir=arg.extra_flickr8k,
            flickr8k_splits=("train",),
        ),
    )


def _language_model(kind: str):
    def build(config: ml_collections.ConfigDict, arg: ml_collections.ConfigDict) -> None:
        config.model = dict(
            kind=kind,
            dim=arg.dim,
            embed_dim=GLOVE_PACKAGE_DIM if arg.glove else arg.dim,
            glove=arg.glove,
            dropout=LANGUAGE_MODEL_DROPOUT,
        )
        config.evals.dev_perplexity = dict(
            type="perplexity", split="dev", every=config.evals.dev.every
        )

    return build


# kind -> (its own arguments, the builder that sets config.model for them)
BASELINES = {
    "glove_avg": (dict(glove="package", restricted=True), _glove_average),
    "word2vec": (
        dict(
            dim=VTFN_ARGS["dim"],
            algorithm="skipgram",
            w2v_epochs=10,
            w2v_min_count=2,
            extra_flickr8k="",
        ),
        _word2vec,
    ),
    "pure_text_rnn": (_LANGUAGE_MODEL_ARGS, _language_model("pure_text_rnn")),
    "pin_model_a": (_LANGUAGE_MODEL_ARGS, _language_model("pin_model_a")),
}


def baseline_config(
    arg: str | None, kind: str, source: str, **overrides
) -> ml_collections.ConfigDict:
    """A VTFN-paper baseline (``vtfn_jax.baselines.KINDS``) with VTFN's data and evaluations.

    Shared arguments: data_dir, features, captions, fraction, runlocal (as for VTFN) and
    source ("files" | "shapes_world", default ``source``). Per kind (``BASELINES``):
      glove_avg      glove ("package" | glove.*.txt path), restricted (R: training vocabulary only)
      word2vec       dim, algorithm ("skipgram" | "cbow"), w2v_epochs, w2v_min_count,
                     extra_flickr8k (a Flickr8k folder under data_dir: its train captions are added)
      pure_text_rnn, pin_model_a   lr, epochs, dim (GRU state = sentence vector), glove (word init)
    Only ``config.model`` (and a language model's perplexity evaluation) differs
    from VTFN's config, and there is no ``config.loss``.
    """
    if kind not in BASELINES:
        raise KeyError(f"unknown baseline kind {kind!r}; known: {sorted(BASELINES)}")
    own, build = BASELINES[kind]
    defaults = {**{k: VTFN_ARGS[k] for k in BASELINE_DATA_ARGS}, "source": source, **own}
    unknown = sorted(set(overrides) - set(defaults))
    if unknown:
        raise KeyError(
            f"unknown overrides {unknown} for baseline {kind!r}; known: {sorted(defaults)}"
        )
    arg = common.parse_arg(arg, **{**defaults, **overrides})
    shared = {key: value for key, value in arg.to_dict().items() if key in VTFN_ARGS}
    config = run_parsed(parse(None, **shared), arg.source)
    build(config, arg)
    return config
