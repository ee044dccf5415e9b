"""Quality tables: I2CE and VTFN against human judgments and STS, model selection on held-out
captions, and the meta-evaluation of metrics with its cost; each run as a script."""
