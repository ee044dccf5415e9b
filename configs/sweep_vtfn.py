"""VTFN ablation grid: text encoder × loss × dataset (5 × 6 × 2 = 60 jobs).

    python -m launch.sweep --config=configs/sweep_vtfn.py --workdir=runs/vtfn_grid
    python -m launch.sweep --config=configs/sweep_vtfn.py:dataset=shapes_world,encoder=bow_sum+gru \\
        --workdir=runs/vtfn_shapes --jobs 2

Grid arguments choose a sub-grid; each takes one value or several joined by
``+``: ``encoder`` (bow_sum, bow_mean, gru, lstm, cnn), ``loss`` (pearson,
covariance, kendall, rank, margin, triplet, or any other capsim.losses name)
and ``dataset`` (shapes_world, files). ``seeds=K`` repeats every job over
``config.seed`` 0..K-1; the results then give each configuration's mean over its
seeds with a 95% interval (launch.aggregate). The other arguments are the numbers
below and vtfn_jax.config_lib.OPTIONS (data_dir, features, runlocal, ...); they
apply to every job. ``get_config`` is the grid's first job; the others change
it through ``config.*`` keys: the encoder replaces ``config.model`` (a BOW tower
ties its sizes to the word vectors), the dataset sets ``config.data.sources`` and
its evaluation tasks, the loss ``config.loss.name``.
"""

import ml_collections

from capsim import config_lib as common
from vtfn_jax import config_lib as vtfn_common

TRAIN_MODULE = "vtfn_jax.train"
ENCODERS = vtfn_common.ENCODERS
LOSSES = ("pearson", "covariance", "kendall", "rank", "margin", "triplet")
# dataset -> the caption sources it trains on ("": the ``sources`` argument's named files)
DATASETS = {"shapes_world": "shapes_world", "files": ""}
VALUE_SEPARATOR = "+"
# Table column -> path into a job's results.json.
METRICS = {
    "same_diff_auc": ("same_diff", "auc"),
    "same_diff_pearson": ("same_diff", "pearson"),
    "c2i_mrr": ("retrieval", "c2i_mrr"),
    "shapes_graded_spearman": ("shapes", "graded_spearman"),
    "shapes_synonym_spearman": ("shapes", "synonym_spearman"),
    "dev_auc": ("train", "best_dev_same_image_auc"),
    "steps": ("train", "steps"),
}


def _parse(arg: str | None) -> ml_collections.ConfigDict:
    return common.parse_arg(
        arg,
        **vtfn_common.OPTIONS,
        encoder=VALUE_SEPARATOR.join(ENCODERS),
        loss=VALUE_SEPARATOR.join(LOSSES),
        dataset=VALUE_SEPARATOR.join(DATASETS),
        dim=128,  # N
        lr=1e-3,  # Adam
        decay=0.5,  # the learning rate's factor every decay_steps
        decay_steps=2000,
        l2=1e-6,
        batch=128,
        epochs=20.0,  # with early stopping (patience 5) on the dev evaluation
        seeds=1,  # each configuration repeated over config.seed 0..seeds-1
        eval_every=100,
    )


def _choices(arg: ml_collections.ConfigDict, key: str) -> tuple[str, ...]:
    values = tuple(filter(None, arg[key].split(VALUE_SEPARATOR)))
    if key == "encoder" and set(values) - set(ENCODERS):
        raise KeyError(
            f"unknown encoders {sorted(set(values) - set(ENCODERS))}; known: {list(ENCODERS)}"
        )
    if not values:
        raise ValueError(f"config argument {key!r} needs a value")
    return values


def _job_config(
    arg: ml_collections.ConfigDict, dataset: str, encoder: str, loss: str
) -> ml_collections.ConfigDict:
    job = ml_collections.ConfigDict({**arg.to_dict(), "loss": loss})
    config = vtfn_common.run(job, sources=DATASETS[dataset])
    config.model = vtfn_common.model(job, encoder=ENCODERS[encoder])
    config.loss = vtfn_common.loss(job)
    return vtfn_common.finish(config, job)


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    arg = _parse(arg)
    return _job_config(arg, *(_choices(arg, key)[0] for key in ("dataset", "encoder", "loss")))


def get_sweep(hyper, arg: str | None = None) -> list[dict]:
    arg = _parse(arg)
    first = {key: _choices(arg, key)[0] for key in ("dataset", "encoder", "loss")}

    def config_of(**choice: str) -> ml_collections.ConfigDict:
        return _job_config(arg, **{**first, **choice})

    datasets = {
        name: {
            "config.data.sources": config_of(dataset=name).data.sources,
            "config.evals": config_of(dataset=name).evals.to_dict(),
        }
        for name in _choices(arg, "dataset")
    }
    encoders = {
        name: {"config.model": config_of(encoder=name).model.to_dict()}
        for name in _choices(arg, "encoder")
    }
    return hyper.product(
        [
            hyper.sweep("dataset", datasets),
            hyper.sweep("encoder", encoders),
            hyper.sweep("config.loss.name", _choices(arg, "loss")),
            *common.seed_sweep(hyper, arg.seeds),
        ]
    )
