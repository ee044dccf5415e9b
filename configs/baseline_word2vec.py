"""word2vec baseline: skip-gram (or ``algorithm=cbow``) vectors trained on the training captions.

    python -m vtfn_jax.train --config=configs/baseline_word2vec.py:data_dir=/data,extra_flickr8k=flickr8k --workdir=...

Needs gensim (the [baselines] extra). See configs.vtfn_common.baseline_config.
"""

import ml_collections

from configs import vtfn_common


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    return vtfn_common.baseline_config(arg, kind="word2vec", source="files")
