"""The rebuild command moved beside the trainer (loading a model must not import it)."""

import sys

sys.exit("the rebuild command is now: python -m i2ce_jax.rebuild_pretrained --help")
