"""I2CE: a GRU sentence autoencoder trained on captions, and the caption metric it gives."""

from capsim.extras import require_jax_stack

require_jax_stack("i2ce_jax (I2CE training and scoring)")
