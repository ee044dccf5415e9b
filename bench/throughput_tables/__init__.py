"""The tables of bench/throughput.py, one module each; imported by it, never run alone."""
