"""I2CE on the embedded shapes world: trains in about a minute on 2 CPU cores.

    python -m i2ce_jax.train --config=configs/i2ce_demo.py --workdir=/tmp/i2ce_demo
    python -m i2ce_jax.train --config=configs/i2ce_demo.py:loss=margin --workdir=...

Arguments: loss (none | margin | triplet | infonce | any capsim.losses name),
runlocal (a few steps, for tests). The default is the InfoNCE branch (beyond
the paper): on this world the paper's margin branch, at this budget, barely
separates captions of different scenes (dev AUC 56, τc 10.3 against the
rule-based quality), while InfoNCE reaches dev AUC 98 and τc 59.6.
"""

import ml_collections

from capsim import config_lib as common
from i2ce_jax import config_lib as i2ce_common


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    arg = common.parse_arg(
        arg,
        loss="infonce",
        lr=2e-3,  # Adam, constant
        decay=1.0,
        decay_steps=1000,
        l2=0.0,
        batch=64,
        epochs=6.0,
        eval_every=100,  # dev same-image AUC, steps
        runlocal=False,
    )
    if arg.runlocal:  # a smaller world, fewer epochs, small batches, 5 dev evaluations
        arg.update(batch=16, epochs=3.0, eval_every=30)
    config = common.trainer(
        arg, checkpoint_every=200, patience=0, log_every=5 if arg.runlocal else 25
    )
    config.data = dict(
        sources=("shapes_world",),  # capsim.data.sources.SOURCES: the embedded world
        shapes_world=dict(num_scenes=200 if arg.runlocal else 2000, seed=0),
        max_len=24,
        length_buckets=0,  # >0: length-bucketed batches, widths rounded to this multiple
        topic_clusters=0,  # >0: hard negatives, runs of captions sharing a content word
        min_count=1,
        max_vocab=0,
    )
    config.model = dict(
        embed_dim=64, hidden_dim=128, dropout=0.0, glove="", embed_std=1.0, dtype="float32"
    )
    config.loss = i2ce_common.branch(arg.loss)
    config.scorer = dict(pooling="top-3")
    config.evals = dict(
        dev=common.same_image_eval(every=arg.eval_every),
        judgments=dict(type="judgments", set="shapes_world"),
    )
    return config
