"""capsim's cache directory: METEOR's paraphrase index and the commands' compiled programs."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "CAPSIM_CACHE_DIR"
# The I2CE scorer's batch shapes compile in 0.3-1 s each: worth a file, unlike JAX's default.
MIN_COMPILE_SECONDS = 0.1


def cache_dir() -> Path:
    """$CAPSIM_CACHE_DIR, else $XDG_CACHE_HOME/capsim, else ~/.cache/capsim."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "capsim"


def use_compilation_cache() -> Path | None:
    """Turns on JAX's persistent compilation cache for a command's process, in ``cache_dir()/jax``.

    A command's next run then loads its compiled programs instead of compiling them
    (bench/RESULTS.md, "Scoring throughput": the I2CE scorer's first call on the Flickr8k-Expert
    candidates). Call it before anything is compiled. Left alone, returning None, when JAX's own
    cache directory is configured or the folder cannot be made.
    """
    import jax  # here, so that METEOR's index needs no JAX

    if jax.config.jax_compilation_cache_dir:
        return None
    folder = cache_dir() / "jax"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    return folder
