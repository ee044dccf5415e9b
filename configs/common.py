"""Pieces every config shares: ``:key=value`` arguments, trainer defaults, data blocks.

A config file is loaded as ``--config=configs/NAME.py:arg``; ``arg`` is a comma
list such as ``loss=kendall,runlocal``. ``parse_arg`` turns it into a
ConfigDict, typed by the defaults the file declares. Paper-specific helpers
live in ``configs/i2ce_common.py`` and ``configs/vtfn_common.py``; each
experiment file states its own data, model and loss choices with them.
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
    """Fields of the shared training loop (capsim.train.Trainer), filled in place."""
    config.seed = 0
    config.batch_size = 128
    config.num_epochs = 4.0
    config.num_steps = -1  # -1: derived from num_epochs and the corpus size
    config.log_every = 50
    config.checkpoint_every = 1000
    config.input_workers = 0  # grain worker processes building batches (0: in the trainer)
    config.allow_config_change = False  # resume a workdir whose model/data keys differ
    config.optimizer = ml_collections.ConfigDict(
        dict(
            learning_rate=5e-4,
            decay_rate=1.0,
            decay_steps=1000,
            l2=0.0,
            clip_norm=5.0,
            frozen=(),  # parameter path names left untrained, e.g. ("embed",) for GloVe
        )
    )
    config.early_stopping = ml_collections.ConfigDict(
        dict(metric="dev/same_image_auc", mode="max", patience=0)
    )


def caption_files(data_dir: str, flickr8k_dir: str = "") -> dict:
    """Which caption files to read under ``data_dir`` (capsim.data.corpus.load_caption_files):
    every ``coco/captions_*.json``, and Flickr8k's train split when ``flickr8k_dir`` is set."""
    return dict(
        source="files",
        data_dir=data_dir,
        coco_captions=("coco/captions_*.json",),
        karpathy="",
        karpathy_splits=("train", "restval"),
        flickr8k_dir=flickr8k_dir,
        flickr8k_splits=("train",),
    )


def same_image_eval(every: int) -> dict:
    """The early-stopping evaluation: same-image AUC of dev captions, every ``every`` steps."""
    return dict(type="same_image", split="dev", every=every)


RUNLOCAL_STEPS = 10
RUNLOCAL_EVERY = 5


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
