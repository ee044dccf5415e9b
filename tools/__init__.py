"""Development tools, not benchmarks: commits compared, test-suite timing, install size, demo
outputs. Run from a clone as ``python tools/NAME.py``; their tables go to bench/RESULTS.md."""
