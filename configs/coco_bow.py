"""VTFN with the bow_sum text encoder on COCO captions plus frozen image features.

    python -m vtfn_jax.train --config=configs/coco_bow.py:data_dir=/data,features=/data/inception --workdir=...

With the default `features=coco_object_labels` it trains on COCO object labels
(an 80-d multi-hot stand-in, not CNN features). Arguments: see configs.vtfn_common.parse.
"""

import ml_collections

from configs import vtfn_common


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    # Data: COCO captions with image features; same/diff, retrieval and STS reports.
    # lr 1e-2 and N = 256: chosen on dev AUC for BOW (issue 8, bench/RESULTS.md §1).
    config, arg = vtfn_common.run(arg, source="files", lr=1e-2, dim=256)
    # Model: text tower = the normalised sum of word vectors (N = dim), affine image map W.
    config.model = vtfn_common.text_tower(arg, encoder="bow_sum")
    # Loss: Pearson over correct and shuffled caption-image pairs (:loss=... for the others).
    config.loss = vtfn_common.loss(arg)
    return config
