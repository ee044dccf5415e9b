"""Speed benches on this machine beside bench/throughput.py, each run as a script."""
