"""The rows of bench/accelerator_check.py: its time budget, training, levers, input wait and
PyTorch twins; imported by the check, never run alone."""
