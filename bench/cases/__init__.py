"""The training cases every bench times: models, sizes, synthetic batches and FLOP counts
(``catalogue``, ``flops``), and the PyTorch twins of those models (``torch_reference``)."""
