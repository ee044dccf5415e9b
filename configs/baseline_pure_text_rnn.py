"""PureTextRNN baseline: a GRU language model on the training captions.

    python -m vtfn_jax.train --config=configs/baseline_pure_text_rnn.py:data_dir=/data --workdir=...

Arguments: the ones below, and vtfn_jax.config_lib.BASELINE_OPTIONS (data_dir,
sources, tfds_data_dir, features, captions, fraction, select, runlocal); ``sources=shapes_world`` (or ``source=shapes_world``) for the embedded world.
"""

import ml_collections

from capsim import config_lib as common
from vtfn_jax import config_lib as vtfn_common

DEFAULTS = dict(
    **vtfn_common.BASELINE_OPTIONS,
    source="files",
    dim=128,  # the GRU state: the sentence vector
    glove="",  # "package" or a glove.*.txt path: word vectors start from GloVe
    dropout=0.2,
    # trained as VTFN's towers are (Adam, decay, epochs, early stopping on dev AUC)
    lr=1e-3,
    decay=0.5,
    decay_steps=2000,
    l2=1e-6,
    batch=128,
    epochs=20.0,
    eval_every=100,
)


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    return build(common.parse_arg(arg, **DEFAULTS))


def build(arg: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """The run of parsed arguments (``DEFAULTS``' keys); a paper table's row calls it."""
    config = vtfn_common.baseline_run(arg)  # VTFN's data and evaluations
    config.model = vtfn_common.language_model(arg, kind="pure_text_rnn")
    config.evals.dev_perplexity = vtfn_common.perplexity_eval(arg)
    return vtfn_common.finish(config, arg)
