"""The command line shared by training entry points (``python -m <paper>.train``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_collections
from absl import app, flags
from ml_collections import config_flags

from capsim.config_lib import apply_overrides
from capsim.errors import CapsimError
from capsim.logs import setup_logging


def config_roots(argv: list[str]) -> list[str]:
    """The folders that hold the ``configs/`` package of each ``--config=FILE`` in ``argv``.

    Config files may import each other (``from configs import ...``) from the clone
    they live in, which is not installed; putting its root on sys.path lets the
    console scripts (``vtfn-train``, ``i2ce-train``) load them from any directory.
    """
    roots = []
    for item in argv:
        if item.startswith("--config="):
            path = Path(item.split("=", 1)[1].split(":", 1)[0]).expanduser().resolve()
            roots.append(str(path.parent.parent))
    return roots


def run_training_cli(
    train_and_evaluate: Callable[[ml_collections.ConfigDict, str], Any],
) -> None:
    """Parses ``--config=FILE[:arg] --workdir=DIR`` and calls ``train_and_evaluate``.

    Flags are defined here, not at import, so importing a train module (tests,
    notebooks) registers nothing. ``--config.key=value`` overrides existing keys, and
    ``--overrides=FILE.json`` sets many (``{"config.model.encoder": {...}}``).
    Logs show warnings only; ``--verbosity=1`` shows every INFO line.
    """
    for root in config_roots(sys.argv):
        if root not in sys.path:
            sys.path.insert(0, root)
    config = config_flags.DEFINE_config_file("config", None, "Config file.", lock_config=True)
    workdir = flags.DEFINE_string("workdir", None, "Where checkpoints, logs and results go.")
    overrides = flags.DEFINE_string(
        "overrides", None, "A JSON file of config.a.b keys to set (a sweep job's settings)."
    )
    flags.mark_flags_as_required(["config", "workdir"])

    def main(argv: list[str]) -> None:
        if len(argv) > 1:
            raise app.UsageError(f"unexpected arguments: {argv[1:]}")
        setup_logging(verbose=flags.FLAGS.verbosity >= 1)
        if overrides.value:
            apply_overrides(config.value, json.loads(Path(overrides.value).read_text()))
        try:
            train_and_evaluate(config.value, workdir.value)
        except CapsimError as error:  # bad input, a damaged workdir: one line that says what
            sys.exit(f"{train_and_evaluate.__module__}: error: {error}")

    app.run(main)
