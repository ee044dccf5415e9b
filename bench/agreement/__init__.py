"""capsim's metrics against the reference implementations they copy (the jar's METEOR and PTB
tokenizer), each run as a script."""
