"""The I2CE models shipped in the package (``I2CEScorer.pretrained(name)``): COCO captions only.

    python -m i2ce_jax.pretrained --name base --data_dir ../shared/data

trains this config (``:model=base``) and exports its encoder into the package.
Flickr8k captions stay out (their licence is research-only). The variant
(InfoNCE) and the sizes were chosen on held-out COCO captions (same-image AUC),
never on human judgments: see i2ce_jax/pretrained/MODEL_CARD.md. Other
arguments are those of configs.i2ce_common.parse (``runlocal`` for a
smoke run).
"""

import ml_collections

from configs import i2ce_common

LOSS = "infonce"
EPOCHS = 8.0
# name -> sizes. "base" is the default: within the held-out AUC's noise of
# "large" and four times cheaper to score with.
MODELS = {"base": dict(embed=128, hidden=256), "large": dict(embed=300, hidden=512)}


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    items = [item for item in (arg or "").split(",") if item]
    name = "base"
    for item in [item for item in items if item.startswith("model=")]:
        name = item.partition("=")[2]
        items.remove(item)
    if name not in MODELS:
        raise KeyError(f"unknown pretrained model {name!r}; known: {sorted(MODELS)}")
    sizes = [f"{key}={value}" for key, value in MODELS[name].items()]
    defaults = [f"epochs={EPOCHS}", "flickr8k=False", *sizes]
    return i2ce_common.coco_config(",".join(defaults + items), loss=LOSS)
