"""VTFN (Kurach et al. 2017): caption encoders trained against frozen image features."""

from capsim.extras import require_jax_stack

require_jax_stack("vtfn_jax (VTFN training and encoders)")

from vtfn_jax.sentence_encoder import SentenceEncoder  # noqa: E402 (after the check)

__all__ = ["SentenceEncoder"]
