"""VTFN's config pieces: its options, the run (trainer, data, evaluations), the model,
the loss, and the baselines' models. Numbers come from the experiment files.

Options (vtfn_jax.config_lib.OPTIONS): data_dir; sources (``+``-joined names
of capsim.data.sources.SOURCES, e.g. ``coco_tfds`` for a prepared TFDS
``coco_captions``; captions without a feature are dropped and counted);
tfds_data_dir (where that TFDS copy lives: a folder or a bucket path, "" for
TFDS's default); features ("coco_object_labels" or a FeatureStore folder
written by vtfn_jax.extract_features, keyed by photo key: the COCO id,
``flickr/<photo id>``); captions ("one" per image, as in the paper, or
"all"); pca (image features reduced to this many components, 0: none);
fraction (of the training images kept, nested across fractions: the data-scale
curve); glove ("" | "package" | glove.*.txt path; sets the word-vector size to
the file's); glove_words (with glove: the vocabulary is the captions' words
plus GloVe's first glove_words words by rank, -1 all of them, so words only
evaluation text uses keep their GloVe vector); frozen_words (word vectors left
untrained, e.g. GloVe's, while the rest of the tower learns); pivot (weight of
the caption-pivot loss); image (weight of the image loss; 0 with pivot>0 is the
CaptionPivot control); select ("dev_auc": early stopping on held-out images'
same-image AUC, or "avg2016": on STS16 mean Pearson, the paper's criterion);
level ("sentence": each training caption is one example, as VTFN trains; "word": each of
its words is an example of its own for the caption's image, the word-level training of
the paper's section 5.4, for a BOW tower); runlocal (a few steps on little data).
"""

from __future__ import annotations

import types

import ml_collections

from capsim import config_lib as common

# The options every VTFN file (and baseline) takes beside its own numbers; all off or
# neutral by default, so a file's defaults are the paper's run.
OPTIONS = dict(
    data_dir="../shared/data",
    sources="coco",
    tfds_data_dir="",
    features="coco_object_labels",
    captions="one",
    pca=0,
    fraction=1.0,
    glove="",
    glove_words=-1,
    frozen_words=False,
    pivot=0.0,
    image=1.0,
    select="dev_auc",
    level="sentence",
    runlocal=False,
)
GLOVE_PACKAGE_DIM = 50  # the offline glove.6B.50d package
SHAPES_WORLD = "shapes_world"  # the embedded world's name in capsim.data.sources.SOURCES


def run(arg: ml_collections.ConfigDict, sources: str = "") -> ml_collections.ConfigDict:
    """Trainer, data and evaluations of a VTFN-paper run, from the file's arguments.

    The file's own numbers are read from ``arg``: batch, epochs, lr, decay,
    decay_steps, l2 and eval_every (the dev evaluation's cadence). The caption
    sources are ``sources`` when the file fixes them (the demos: ``shapes_world``),
    else ``arg.sources``. Named files: with ``features`` (250 dev and 500 test
    images held out), reported on same/different pairs, retrieval and STS
    2012-2016. The shapes world: its own splits and features, reported on its own
    pairs too.
    """
    frozen = ("embed",) if arg.frozen_words else ()
    config = common.trainer(arg, checkpoint_every=500, patience=5, frozen=frozen)
    names = common.plus_joined(sources or arg.sources)
    config.data = common.caption_sources(arg.data_dir, names, tfds_data_dir=arg.tfds_data_dir)
    config.data.update(
        shapes_world=dict(num_scenes=2000, seed=0),
        features=arg.features,
        object_labels="coco/val2014_object_labels.json",
        object_labels_idf=True,
        pca_dim=arg.pca,
        train_fraction=arg.fraction,
        captions_per_image=arg.captions,
        train_level=arg.level,
        dev_images=250,
        test_images=500,
        max_len=24,
        length_buckets=0,  # >0: length-bucketed batches, widths rounded to this multiple
        min_count=2,
        max_vocab=0,
    )
    config.evals = evals(arg, world=SHAPES_WORLD in names)
    if arg.select == "avg2016":  # the paper's model selection: mean Pearson on STS 2016
        config.early_stopping.metric = "sts16/avg2016"
    elif arg.select != "dev_auc":
        raise ValueError(f"select must be 'dev_auc' or 'avg2016', got {arg.select!r}")
    return config


def evals(arg: ml_collections.ConfigDict, world: bool) -> dict:
    """The dev evaluation every ``eval_every`` steps, then the reports: the shapes
    world's own pairs on the ``world``, STS 2012-2016 on named files."""
    tasks = dict(
        dev=common.same_image_eval(every=arg.eval_every),
        same_diff=dict(type="same_diff", split="test"),
        retrieval=dict(type="retrieval", split="test"),
    )
    if world:
        tasks["shapes"] = dict(type="shapes")
    else:
        tasks["sts"] = dict(type="sts", sts_dir=arg.data_dir + "/sts")
    if arg.select == "avg2016":
        tasks["sts16"] = dict(
            type="sts", sts_dir=arg.data_dir + "/sts", years=("STS16",), every=arg.eval_every
        )
    return tasks


def finish(config: ml_collections.ConfigDict, arg: ml_collections.ConfigDict):
    """The config as it is, or shrunk to a few steps on little data with ``runlocal``."""
    return common.shrink_for_runlocal(config) if arg.runlocal else config


def model(arg: ml_collections.ConfigDict, encoder: dict) -> dict:
    """VTFN's model: the ``encoder`` text tower (output N = ``dim``) and the affine image map W.

    ``encoder`` is the tower's kind and its own keys (capsim.encoders.build_encoder).
    GloVe sets the word vectors to its 50 dimensions, and a BOW tower's N with them.
    """
    word_dim = GLOVE_PACKAGE_DIM if arg.glove else arg.dim
    bow = encoder["kind"].startswith("bow")
    return dict(
        kind="vtfn",
        dim=word_dim if bow else arg.dim,
        embed_dim=word_dim,
        glove=arg.glove,
        glove_words=arg.glove_words if arg.glove else 0,
        encoder=encoder,
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


# --------------------------------------------------------------------------- baselines
# Every baseline shares VTFN's data and evaluations, so splits and sets match; its
# file states its own numbers and builds ``config.model`` with one of these.
BASELINE_OPTIONS = {
    key: OPTIONS[key]
    for key in (
        "data_dir",
        "sources",
        "tfds_data_dir",
        "features",
        "captions",
        "fraction",
        "select",
        "runlocal",
    )
}
W2V_RUNLOCAL_EPOCHS = 2


BASELINE_SOURCES = {"files": "", SHAPES_WORLD: SHAPES_WORLD}


def baseline_run(arg: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """VTFN's trainer, data and evaluations for a baseline's arguments: on ``arg.sources``,
    or on the shapes world with ``source=shapes_world`` (``sources=shapes_world`` too)."""
    if arg.source not in BASELINE_SOURCES:
        raise ValueError(f"source must be one of {sorted(BASELINE_SOURCES)}, got {arg.source!r}")
    full = ml_collections.ConfigDict({**OPTIONS, **arg.to_dict()})
    return run(full, BASELINE_SOURCES[arg.source])


def glove_average(arg: ml_collections.ConfigDict) -> dict:
    """GloVe average: ``glove`` ("package" | glove.*.txt path); R keeps the training words only."""
    return dict(kind="glove_avg", glove=arg.glove, restricted=arg.restricted, dim=GLOVE_PACKAGE_DIM)


def word2vec(arg: ml_collections.ConfigDict) -> dict:
    """word2vec on the training captions, plus those of ``extra_sources`` (``+``-joined
    names of capsim.data.sources.SOURCES, e.g. ``flickr8k``), less dev and test images."""
    return dict(
        kind="word2vec",
        dim=arg.dim,
        w2v_algorithm=arg.algorithm,
        w2v_epochs=W2V_RUNLOCAL_EPOCHS if arg.runlocal else arg.w2v_epochs,
        w2v_min_count=arg.w2v_min_count,
        extra_sources=common.plus_joined(arg.extra_sources),
    )


def language_model(arg: ml_collections.ConfigDict, kind: str) -> dict:
    """A caption language model, ``pure_text_rnn`` or ``pin_model_a``: its GRU state
    (size ``dim``) is the sentence vector; ``glove`` starts its word vectors."""
    return dict(
        kind=kind,
        dim=arg.dim,
        embed_dim=GLOVE_PACKAGE_DIM if arg.glove else arg.dim,
        glove=arg.glove,
        dropout=arg.dropout,
        dtype="float32",  # compute dtype; "bfloat16" on GPU/TPU (parameters stay float32)
    )


def perplexity_eval(arg: ml_collections.ConfigDict) -> dict:
    """A language model's dev perplexity, every ``eval_every`` steps."""
    return dict(type="perplexity", split="dev", every=arg.eval_every)


# --------------------------------------------------------------------------- paper tables
# configs/tables/vtfn_*.py: the paper's tables as seeded grids (launch.paper_table).
ENCODERS = {
    "bow_sum": dict(kind="bow_sum"),
    "bow_mean": dict(kind="bow_mean"),
    "gru": dict(kind="gru", dropout=0.2),
    "lstm": dict(kind="lstm", dropout=0.2),
    "cnn": dict(kind="cnn", widths=(1, 2, 3), features=128, pooling="max", dropout=0.2),
}
# Each encoder's settled numbers, as configs/coco_*.py give them (BOW: issue 8's calibration).
ENCODER_NUMBERS = {
    "bow_sum": dict(dim=256, lr=1e-2),
    "bow_mean": dict(dim=256, lr=1e-2),
    "gru": dict(dim=128, lr=1e-3),
    "lstm": dict(dim=128, lr=1e-3),
    "cnn": dict(dim=128, lr=1e-3),
}
TABLE_SCALES = {
    "here": dict(captions="all", epochs=4.0, seeds=5),
    "paper": dict(sources="coco_tfds", captions="one", epochs=20.0, select="avg2016", seeds=5),
}
TABLE_SCALE_NOTES = {
    "here": (
        "COCO val2017 captions, all five an image, 4,202 training images, 4 epochs, on COCO "
        "object labels (an 80-d multi-hot stand-in, not InceptionV3 features); early stopping "
        "on 250 held-out images' same-image AUC. COCO-Test is the same/different-image pairs "
        "of 500 held-out val2017 images (2,000 pairs), not the paper's COCO test split. "
        "Pin-Test is not public and is left out, so the average is over three sets, not four."
    ),
    "paper": (
        "COCO train2014 through TFDS coco_captions (Karpathy splits), one caption an image, "
        "InceptionV3 features (features=FOLDER, written by vtfn_jax.extract_features), 20 "
        "epochs selected on STS16 as the paper; for a GPU or the cluster. Pin-Test, SBU "
        "and Pinterest5M are not public: left out."
    ),
}
# The paper's evaluation sets: STS images2014 and images2015 (Pearson x 100) and COCO-Test.
TABLE_MEASURES = {
    "images2014": ("sts", "STS14", "subsets", "images", "pearson"),
    "images2015": ("sts", "STS15", "subsets", "images", "pearson"),
    "COCO-Test": ("same_diff", "pearson"),
}
TABLE_AVERAGES = {"average": tuple(TABLE_MEASURES)}
TABLE_METRICS = {**TABLE_MEASURES, "dev_auc": ("train", "best_dev_same_image_auc")}


# configs/coco_bow.py's numbers, the rows' common recipe (an encoder row sets its own dim, lr)
TABLE_NUMBERS = dict(
    loss="pearson",
    dim=256,
    lr=1e-2,
    decay=0.5,
    decay_steps=2000,
    l2=1e-6,
    batch=128,
    epochs=20.0,
    eval_every=100,
)


def table_arg(arg: str | None, **defaults) -> ml_collections.ConfigDict:
    """A VTFN table's argument: OPTIONS, TABLE_NUMBERS, the table's own ``defaults`` (its
    ``rows``), ``scale`` (TABLE_SCALES: here or paper) and ``seeds``."""
    return common.parse_scaled_arg(
        arg, TABLE_SCALES, **{**OPTIONS, **TABLE_NUMBERS, "seeds": 5, **defaults}
    )


# What a baseline row takes from its table: the data, the scale's schedule and selection.
BASELINE_TABLE_KEYS = (*BASELINE_OPTIONS, "batch", "epochs", "eval_every")


def baseline_row(
    arg: ml_collections.ConfigDict, baseline: types.ModuleType
) -> ml_collections.ConfigDict:
    """A baseline's own file (a configs/baseline_*.py module: its ``DEFAULTS`` and
    ``build``) with a table's data, schedule and selection (BASELINE_TABLE_KEYS), so it
    trains on what the table's VTFN rows train on, with its own numbers (dim, lr)."""
    job = {**baseline.DEFAULTS, **{key: arg[key] for key in BASELINE_TABLE_KEYS}}
    return baseline.build(ml_collections.ConfigDict(job))


def encoder_run(arg: ml_collections.ConfigDict, encoder: str) -> ml_collections.ConfigDict:
    """A VTFN run with ``encoder`` (ENCODERS) and its own numbers (ENCODER_NUMBERS)."""
    job = ml_collections.ConfigDict({**arg.to_dict(), **ENCODER_NUMBERS[encoder]})
    config = run(job)
    config.model = model(job, encoder=ENCODERS[encoder])
    config.loss = loss(job)
    return finish(config, job)
