"""The training config of each packaged model: a config file that ships with the package.

    python -m i2ce_jax.train --config=configs/i2ce_pretrained.py:model=large,data_dir=D --workdir=W

(``configs/i2ce_pretrained.py`` is this file's ``get_config``), or, from an
installed wheel, ``python -m i2ce_jax.rebuild_pretrained --name large --data_dir D
--out DIR`` (or ``--into_package``), which trains it and exports the encoder. Each model
states its own data, sizes and schedule below; the variant (InfoNCE) and the mixtures were chosen on
held-out captions of each domain (same-image AUC on ``dev_coco`` and
``dev_flickr``), never on human judgments: see MODEL_CARD.md beside this file.

* ``base`` (the default) and ``large``: text whose licence allows
  redistribution only (COCO captions, CC BY 4.0; GloVe 6B word vectors, PDDL).
* ``research``: also Flickr8k and Flickr30k captions, whose terms are
  non-commercial research only; asked for by name
  (``--model research``).

Other arguments are i2ce_jax.config_lib.OPTIONS (``runlocal`` for a smoke run)
and the numbers below.
"""

from __future__ import annotations

import ml_collections

from capsim import config_lib as common
from i2ce_jax import config_lib as i2ce_common

# coco_extra (COCO's own val2014 subset file) raised base's dev mean from 96.82 to 97.30.
PERMISSIVE = "coco+coco_lines+coco_extra"  # + cc3m was lower on both dev splits (bench/RESULTS.md)
# CC3M left out: it lowered the permissive dev splits, and research's dev mean was
# 98.83 without it (4 epochs) against 98.54 with it (2 epochs).
RESEARCH = "coco+flickr8k+flickr30k+coco_lines+coco_extra"
# Every model: InfoNCE, GloVe 50-d word vectors, Adam 5e-4, batch 128,
# length-bucketed batches, dev AUC every 200 steps; training seed config.seed=0 and
# data seed config.data.seed=0 (capsim.config_lib: the held-out dev images' draw).
_SHARED = dict(
    loss="infonce",
    glove="package",
    embed=50,
    init_std=1.0,  # words GloVe lacks start from N(0, 1)
    lr=5e-4,
    decay=1.0,
    decay_steps=1000,
    l2=0.0,
    batch=128,
    buckets=4,
    eval_every=200,
)
MODELS = {
    "base": dict(_SHARED, sources=PERMISSIVE, hidden=256, epochs=8.0),
    "large": dict(_SHARED, sources=PERMISSIVE, hidden=512, epochs=8.0),
    "research": dict(_SHARED, sources=RESEARCH, hidden=256, epochs=4.0),
}
DEFAULT_MODEL = "base"


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    """``model=NAME`` picks the recipe; any other argument overrides that recipe's value."""
    defaults = {**i2ce_common.OPTIONS, **MODELS[DEFAULT_MODEL], "model": DEFAULT_MODEL}
    name = common.parse_arg(arg, **defaults).model
    if name not in MODELS:
        raise KeyError(f"unknown pretrained model {name!r}; known: {sorted(MODELS)}")
    arg = common.parse_arg(arg, **{**i2ce_common.OPTIONS, **MODELS[name], "model": name})
    config = i2ce_common.run(arg)
    config.model = i2ce_common.autoencoder(arg)
    config.loss = i2ce_common.branch(arg.loss, arg.reduction, arg.weight, arg.contrast)
    return i2ce_common.finish(config, arg)
