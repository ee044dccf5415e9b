"""The shipped I2CE model (``I2CEScorer.pretrained()``): COCO captions only.

    python -m i2ce_jax.pretrained --data_dir ../shared/data --workdir /tmp/i2ce_pretrained \
        --out i2ce_jax/pretrained

trains this config and exports its encoder into the package. Flickr8k captions
stay out (their licence is research-only), and the variant and the sizes were
chosen on held-out COCO captions (same-image AUC), never on human judgments:
see i2ce_jax/pretrained/MODEL_CARD.md. Arguments are those of
configs.common.i2ce_files_config (e.g. ``:runlocal`` for a smoke run).
"""

import ml_collections

from configs import common

VARIANT = dict(loss="infonce", embed=300, hidden=512, epochs=8.0, flickr8k=False)


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    defaults = ",".join(f"{k}={v}" for k, v in VARIANT.items() if k != "loss")
    return common.i2ce_files_config(",".join(filter(None, [defaults, arg])), loss=VARIANT["loss"])
