"""The I2CE models shipped in the package (``I2CEScorer.pretrained(name)``).

    python -m i2ce_jax.rebuild_pretrained --name base --data_dir ../shared/data --into_package

trains this config (``:model=base``) and exports its encoder into the package (``--out DIR``
exports it to a folder instead).
The recipes live in the package, i2ce_jax/pretrained/recipe.py, so that an
installed wheel rebuilds a model without this clone; each states its own data,
sizes and schedule there.
"""

from i2ce_jax.pretrained.recipe import get_config

__all__ = ["get_config"]
