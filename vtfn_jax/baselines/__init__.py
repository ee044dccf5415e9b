"""Baselines of the VTFN paper, each a model kind with a train and a load function.

``KINDS[name] = (train(config, workdir, data) -> (embedder, image_embed | None, summary),
load(config, workdir, data) -> (embedder, image_embed | None))``. None of them
maps images into the text space, so retrieval does not apply to them.

  glove_avg      mean GloVe vector; ``model.restricted`` picks R (training vocabulary) or NR
  word2vec       mean of gensim word2vec vectors trained on the captions
  pure_text_rnn  GRU caption language model; its final state is the sentence vector
  pin_model_a    the same language model started from the image feature (PinModelA)
"""

from vtfn_jax.baselines.glove_average import load_glove_average, train_glove_average
from vtfn_jax.baselines.language_models import (
    load_pin_model_a,
    load_pure_text_rnn,
    train_pin_model_a,
    train_pure_text_rnn,
)
from vtfn_jax.baselines.word2vec import load_word2vec, train_word2vec

KINDS: dict = {
    "glove_avg": (train_glove_average, load_glove_average),
    "word2vec": (train_word2vec, load_word2vec),
    "pure_text_rnn": (train_pure_text_rnn, load_pure_text_rnn),
    "pin_model_a": (train_pin_model_a, load_pin_model_a),
}
