"""The benchmarks behind bench/RESULTS.md, grouped by what they measure (bench/README.md).

    python bench/throughput.py --steps 10
    python bench/quality/i2ce_human_judgments.py --data_dir ../shared/data

``harness`` holds what they share (alternating rounds, ratios, load, machine facts,
RESULTS.md sections), ``cases`` the one catalogue of training cases. Each script puts the
clone's root on ``sys.path``, because bench/ and configs/ are used from a clone, not
installed.
"""

import os

# Before torch (and its OpenMP runtime) loads. On a shared, oversubscribed CPU,
# OpenMP threads that spin-wait at every barrier make torch wait on other jobs
# (measured here: 100x slower GRU steps); sleeping waits measure the model, not
# the neighbours. An OMP_WAIT_POLICY set by the caller wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
