"""Baselines of the VTFN paper, each a model kind of vtfn_jax.kinds.KINDS.

Each module declares its kind's ``task`` (how it trains: a capsim.task.Task) and
``load`` (the trained model back from a workdir). None of them maps images into
the text space, so retrieval does not apply to them.

  glove_average     ``glove_avg``: mean GloVe vector; ``model.restricted`` picks R
                    (training vocabulary) or NR
  word2vec          ``word2vec``: mean of gensim word2vec vectors trained on the captions
  language_models   ``pure_text_rnn``: GRU caption language model, its final state the
                    sentence vector; ``pin_model_a``: the same started from the image
                    feature (PinModelA)
"""
