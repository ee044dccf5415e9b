"""I2CE ablation grid: the paper's branches (and InfoNCE) × GRU size on COCO (+ Flickr8k train).

    python -m launch.sweep --config=configs/sweep_i2ce.py --workdir=runs/i2ce_grid
    python -m launch.sweep --config=configs/sweep_i2ce.py:branch=recon+triplet,hidden=256+512 \\
        --workdir=runs/i2ce_small --jobs 2

Grid arguments, each one value or several joined by ``+``: ``branch`` (recon,
margin-mean, margin-max, triplet, infonce) and ``hidden`` (GRU sizes); ``seeds=K``
repeats every job over ``config.seed`` 0..K-1, and the results give each
configuration's mean over its seeds with a 95% interval (launch.aggregate). The
other arguments are the numbers below (the settled recipe of
configs/i2ce_coco_*.py) and i2ce_jax.config_lib.OPTIONS (data_dir, sources,
glove, buckets, runlocal, ...); they apply to every job. ``get_config`` is the
grid's first job; a branch replaces ``config.loss``, a size sets
``config.model.hidden_dim``.
"""

import ml_collections

from capsim import config_lib as common
from i2ce_jax import config_lib as i2ce_common

TRAIN_MODULE = "i2ce_jax.train"
# label -> (loss name, reduction): one, two or three branches, then InfoNCE (beyond the paper).
BRANCHES = {
    "recon": ("none", "mean"),
    "margin-mean": ("margin", "mean"),
    "margin-max": ("margin", "max"),
    "triplet": ("triplet", "mean"),
    "infonce": ("infonce", "mean"),
}
VALUE_SEPARATOR = "+"
# Table column -> path into a job's results.json.
METRICS = {
    "dev_auc": ("best_dev_same_image_auc",),
    "steps": ("steps",),
    "expert_tau_c": ("flickr8k_expert", "I2CE"),
    "cider_tau_c": ("flickr8k_expert", "CIDEr"),
}


def _parse(arg: str | None) -> ml_collections.ConfigDict:
    return common.parse_arg(
        arg,
        **i2ce_common.OPTIONS,
        branch=VALUE_SEPARATOR.join(BRANCHES),
        hidden="512",  # GRU state: the intrinsic vector
        embed=300,
        init_std=1.0,  # word vectors from N(0, 1)
        lr=5e-4,  # Adam, constant
        decay=1.0,
        decay_steps=1000,
        l2=0.0,
        batch=128,
        epochs=8.0,  # with early stopping (patience 4) on the dev evaluation
        seeds=1,  # each configuration repeated over config.seed 0..seeds-1
        eval_every=200,
    )


def _branches(arg: ml_collections.ConfigDict) -> tuple[str, ...]:
    names = tuple(filter(None, arg.branch.split(VALUE_SEPARATOR)))
    unknown = sorted(set(names) - set(BRANCHES))
    if unknown or not names:
        raise KeyError(f"unknown branches {unknown}; known: {list(BRANCHES)}")
    return names


def _hiddens(arg: ml_collections.ConfigDict) -> tuple[int, ...]:
    return tuple(int(size) for size in arg.hidden.split(VALUE_SEPARATOR))


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    arg = _parse(arg)
    loss, reduction = BRANCHES[_branches(arg)[0]]
    job = ml_collections.ConfigDict({**arg.to_dict(), "hidden": _hiddens(arg)[0]})
    config = i2ce_common.run(job)
    config.model = i2ce_common.autoencoder(job)
    config.loss = i2ce_common.branch(loss, reduction, arg.weight)
    return i2ce_common.finish(config, arg)


def get_sweep(hyper, arg: str | None = None) -> list[dict]:
    arg = _parse(arg)
    branches = {
        name: {"config.loss": i2ce_common.branch(*BRANCHES[name], arg.weight).to_dict()}
        for name in _branches(arg)
    }
    return hyper.product(
        [
            hyper.sweep("branch", branches),
            hyper.sweep("config.model.hidden_dim", _hiddens(arg)),
            *common.seed_sweep(hyper, arg.seeds),
        ]
    )
