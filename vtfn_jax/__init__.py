"""VTFN (Kurach et al. 2017): caption encoders trained against frozen image features."""

from vtfn_jax.sentence_encoder import SentenceEncoder

__all__ = ["SentenceEncoder"]
