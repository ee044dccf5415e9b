"""The caption metrics users compute, laid out as pycocoevalcap users look for them.

- ``tokenizer``: the PTB tokenizer (``PTBTokenizer``, ``ptb_tokenize``), without Java;
- ``bleu``, ``rouge``, ``cider``: BLEU-1..4, ROUGE-L and CIDEr-D, quirks included;
- ``meteor``: METEOR 1.5, compiled by numba, equal to the jar;
- ``cocoeval``: ``COCOEvalCap`` and ``python -m capsim.metrics.cocoeval``;
- ``bootstrap``: intervals and paired tests between captioning systems;
- ``coco_metrics``: all of them in one call, saying which could not run;
- ``ngram_counts``, ``tfidf``, ``pooling``: the shared n-gram counts and the
  similarity pooling of I2CE-style scorers.

The harnesses that judge models with these metrics live in ``capsim.eval``; nothing
here imports from there.
"""
