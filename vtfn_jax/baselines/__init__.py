"""Baselines of the VTFN paper, each a model kind with a train and a load function.

``KINDS[name] = (train(config, workdir, data) -> (embedder, image_embed | None, summary),
load(config, workdir, data) -> (embedder, image_embed | None))``.
"""

KINDS: dict = {}
