"""Structure every config shares: ``:key=value`` arguments, the trainer block, data blocks.

A config file is loaded as ``--config=configs/NAME.py:arg``; ``arg`` is a comma
list such as ``loss=kendall,runlocal``. ``parse_arg`` turns it into a
ConfigDict, typed by the defaults the experiment file declares. The helpers
here and in ``i2ce_jax/config_lib.py`` and ``vtfn_jax/config_lib.py`` build
structure from those arguments; the numbers an experiment depends on (sizes,
learning rate and schedule, batch, epochs, evaluation cadence) are the defaults
its own file declares, set nowhere else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import ml_collections

CLIP_NORM = 5.0  # global-norm gradient clipping, the same for every run
# ``config.data.seed``: which images are held out (dev, test) from the caption sources.
# Apart from ``config.seed`` (the training's), so every training seed holds out the same
# images; 0 is the draw of every shipped recipe (runs before data.seed drew with seed 0).
DATA_SEED = 0
RUNLOCAL_STEPS = 10
RUNLOCAL_EVERY = 5


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


def trainer(
    arg: ml_collections.ConfigDict,
    *,
    checkpoint_every: int,
    patience: int,
    frozen: tuple[str, ...] = (),
    log_every: int = 50,
) -> ml_collections.ConfigDict:
    """The fields of capsim.train.Trainer, from the experiment's own arguments.

    Reads ``batch``, ``epochs`` and Adam's ``lr``, ``decay`` (the learning rate's
    factor every ``decay_steps``) and ``l2`` from ``arg``; ``frozen`` names
    parameter paths left untrained, e.g. ``("embed",)`` for fixed GloVe vectors.
    """
    config = ml_collections.ConfigDict()
    config.seed = 0
    config.batch_size = arg.batch
    config.num_epochs = arg.epochs
    config.num_steps = -1  # -1: derived from num_epochs and the corpus size
    config.log_every = log_every
    config.checkpoint_every = checkpoint_every
    config.input_workers = 0  # grain worker processes building batches (0: in the trainer)
    # Where rows of large arrays a batch indexes (VTFN's image features) are gathered:
    # "auto" on the device when they fit in half its free memory, else on the host;
    # "on" (an error before training when they do not fit) or "off" (capsim.data.device_tables).
    config.device_tables = "auto"
    config.allow_config_change = False  # resume a workdir whose model/data keys differ
    # When no checkpoint in the workdir is usable: move the old run to previous-run-N
    # (kept) and train from step 0. A usable checkpoint is resumed either way.
    config.start_over = False
    config.optimizer = dict(
        learning_rate=arg.lr,
        decay_rate=arg.decay,
        decay_steps=arg.decay_steps,
        l2=arg.l2,
        clip_norm=CLIP_NORM,
        frozen=frozen,
    )
    config.early_stopping = dict(metric="dev/same_image_auc", mode="max", patience=patience)
    return config


def caption_sources(
    data_dir: str, names: Sequence[str], dev_sets: Sequence[str] = (), tfds_data_dir: str = ""
) -> dict:
    """Which captions to train on: the named sources of capsim.data.sources.SOURCES under
    ``data_dir`` (``coco_tfds``: a prepared TFDS copy under ``tfds_data_dir``), with the
    held-out ``dev_sets`` domains (none: dev images are drawn from the training captions)
    and the seed of those draws (``DATA_SEED``, fixed across training seeds)."""
    return dict(
        data_dir=data_dir,
        sources=tuple(names),
        dev_sets=tuple(dev_sets),
        seed=DATA_SEED,  # the held-out images' draw; config.seed is the training's
        tfds_data_dir=tfds_data_dir,  # a local folder or a bucket path; "": TFDS's default
        karpathy_splits=("train", "restval"),  # of coco_tfds / coco_karpathy; "test" is refused
        keep_karpathy_test=False,  # True: train on Karpathy COCO test images (dropped by default)
    )


# The numbers of the optimizer (capsim.train.optimizer) and of the loss block
# (config.loss) that members of one pack may differ in: launch.grid's member keys and
# capsim.train.members' vmapped keys both derive from these. Here, without JAX.
HYPERPARAMETERS = ("learning_rate", "decay_rate", "decay_steps", "l2")
LOSS_SCALARS = (
    "margin",
    "temperature",
    "alpha",
    "weight",
    "recon_weight",
    "image_weight",
    "pivot_weight",
)

# How the members of a pack train (capsim.train.members): one vmapped step, or the
# compiled step for each in turn. Here, without JAX, for the launchers' flags.
VMAPPED, IN_TURN = "vmapped", "in_turn"
MEMBER_MODES = (VMAPPED, IN_TURN)
# Earlier spellings still accepted on the command line ("in turn" needed quoting).
MEMBER_MODE_ALIASES = {"in turn": IN_TURN, "in-turn": IN_TURN}


def member_mode_name(value: str) -> str:
    """A ``--member_mode`` value in its one spelling: "auto", "vmapped" or "in_turn"."""
    return MEMBER_MODE_ALIASES.get(value, value)


def seed_sweep(hyper, seeds: int) -> list[list[dict]]:
    """A sweep config's ``seeds=K`` grid argument: every configuration repeated over
    ``config.seed`` 0..K-1 (nothing added for K = 1, so job names stay as they were)."""
    if int(seeds) != seeds or seeds < 1:
        raise ValueError(f"seeds must be a whole number >= 1, got {seeds!r}")
    return [hyper.sweep("config.seed", list(range(int(seeds))))] if seeds > 1 else []


def plus_joined(names: str) -> tuple[str, ...]:
    """``"coco+flickr8k"`` -> ("coco", "flickr8k"); "" -> ()."""
    return tuple(filter(None, names.split("+")))


def same_image_eval(every: int) -> dict:
    """The early-stopping evaluation: same-image AUC of dev captions, every ``every`` steps."""
    return dict(type="same_image", split="dev", every=every)


def shrink_for_runlocal(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """A few steps on little data, for tests and smoke runs; every evaluation kept."""
    config.num_steps = RUNLOCAL_STEPS
    config.batch_size = 16
    config.log_every = RUNLOCAL_EVERY
    for entry in config.evals.values():
        entry.every = RUNLOCAL_EVERY if entry.get("every") else 0
    for key, value in (("dev_images", 50), ("test_images", 50)):
        if key in config.data:
            config.data[key] = value
    if "shapes_world" in config.data:
        config.data.shapes_world.num_scenes = 200
    return config


OVERRIDE_PREFIX = "config."


def _tuples(value: object) -> object:
    """JSON lists back to the tuples that configs hold (widths, splits, sources)."""
    if isinstance(value, list):
        return tuple(_tuples(item) for item in value)
    if isinstance(value, dict):
        return {key: _tuples(item) for key, item in value.items()}
    return value


def apply_overrides(config: ml_collections.ConfigDict, overrides: Mapping[str, object]) -> None:
    """Sets ``config.a.b``-style keys in place (a sweep job's settings, ``--overrides``).

    Existing fields only when ``config`` is locked, so a misspelt key raises KeyError;
    a dict value replaces a whole block, e.g. ``config.model.encoder``.
    """
    bad = sorted(key for key in overrides if not key.startswith(OVERRIDE_PREFIX))
    if bad:
        raise KeyError(f"override keys must start with {OVERRIDE_PREFIX!r}: {bad}")
    for key, value in overrides.items():
        try:
            config.update_from_flattened_dict({key: _tuples(value)}, strip_prefix=OVERRIDE_PREFIX)
        except (KeyError, AttributeError) as error:
            raise KeyError(f"cannot set {key!r}: {error}") from error


SCALE_ARG = "scale"


def parse_scaled_arg(
    arg: str | None, scales: Mapping[str, Mapping[str, object]], **defaults
) -> ml_collections.ConfigDict:
    """``parse_arg`` with a ``scale`` argument naming one of ``scales``: that scale's
    settings replace the defaults, and the argument's own settings win over both (a
    paper table's ``scale=here`` and ``scale=paper``)."""
    parsed = parse_arg(arg, **defaults, **{SCALE_ARG: next(iter(scales))})
    if parsed[SCALE_ARG] not in scales:
        raise ValueError(f"scale must be one of {list(scales)}, got {parsed[SCALE_ARG]!r}")
    given = {item.partition("=")[0] for item in filter(None, (arg or "").split(","))}
    for key, value in scales[parsed[SCALE_ARG]].items():
        if key not in defaults:
            raise KeyError(f"scale {parsed[SCALE_ARG]!r} sets unknown argument {key!r}")
        if key not in given:
            parsed[key] = value
    return parsed


def differing_blocks(
    base: ml_collections.ConfigDict, other: ml_collections.ConfigDict
) -> dict[str, object]:
    """The ``config.*`` overrides that turn ``base`` into ``other``: each top-level field
    that differs, whole (a grid row built as its own config, e.g. a baseline beside VTFN).

    Raises:
        KeyError: ``other`` has a field that ``base`` lacks (an override could not set it).
    """
    extra = sorted(set(other) - set(base))
    if extra:
        raise KeyError(f"fields {extra} are not in the grid's first config")
    overrides = {}
    for key in other:
        value = other[key]
        plain = value.to_dict() if isinstance(value, ml_collections.ConfigDict) else value
        was = base[key].to_dict() if isinstance(base[key], ml_collections.ConfigDict) else base[key]
        if plain != was:
            overrides[f"{OVERRIDE_PREFIX}{key}"] = plain
    return overrides
