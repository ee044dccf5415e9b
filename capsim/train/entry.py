"""The command line shared by training entry points (``python -m <paper>.train``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import ml_collections
from absl import app, flags
from ml_collections import config_flags

from capsim.errors import CapsimError
from capsim.train.writers import setup_logging


def run_training_cli(
    train_and_evaluate: Callable[[ml_collections.ConfigDict, str], Any],
) -> None:
    """Parses ``--config=FILE[:arg] --workdir=DIR`` and calls ``train_and_evaluate``.

    Flags are defined here, not at import, so importing a train module (tests,
    notebooks) registers nothing. ``--config.key=value`` overrides existing keys.
    Logs show warnings only; ``--verbosity=1`` shows every INFO line.
    """
    config = config_flags.DEFINE_config_file("config", None, "Config file.", lock_config=True)
    workdir = flags.DEFINE_string("workdir", None, "Where checkpoints, logs and results go.")
    flags.mark_flags_as_required(["config", "workdir"])

    def main(argv: list[str]) -> None:
        if len(argv) > 1:
            raise app.UsageError(f"unexpected arguments: {argv[1:]}")
        setup_logging(verbose=flags.FLAGS.verbosity >= 1)
        train_and_evaluate(config.value, workdir.value)

    app.run(main)


def run_command(main: Callable[[], int], prog: str) -> None:
    """Runs a command-line ``main``: quiet logs, and bad input as one clear line (exit 1)."""
    setup_logging()
    try:
        sys.exit(main())
    except CapsimError as error:
        sys.exit(f"{prog}: error: {error}")
