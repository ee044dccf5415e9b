"""``python -m i2ce_jax.rebuild_pretrained``: trains a packaged model's recipe and exports it.

    python -m i2ce_jax.rebuild_pretrained --name base --data_dir ../shared/data --out DIR
    python -m i2ce_jax.rebuild_pretrained --name base --data_dir ../shared/data --into_package

A module beside the trainer, not inside i2ce_jax/pretrained/, so that loading a model
(the scorer) never imports the trainer: i2ce_jax.train imports the scorer. The export
overwrites the shipped weights only when asked to (``--into_package``): someone who runs
the command to see what it does must not lose them, so it refuses to start without
``--out`` or ``--into_package``, and says where it wrote.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from i2ce_jax.pretrained import DEFAULT, NAMES, PACKAGE_DIR, WEIGHTS_FILE, export, recipe
from i2ce_jax.train import train_and_evaluate


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command's arguments; exits (status 2) when neither ``--out`` nor
    ``--into_package`` says where the model goes."""
    parser = argparse.ArgumentParser(
        prog="python -m i2ce_jax.rebuild_pretrained",
        description="Train and export a packaged I2CE model (i2ce_jax/pretrained/recipe.py).",
    )
    parser.add_argument("--name", default=DEFAULT, choices=NAMES)
    parser.add_argument("--data_dir", default="../shared/data")
    parser.add_argument("--workdir", default=None, help="default: /tmp/i2ce_pretrained_NAME")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", default=None, help="the folder the model is exported to")
    where.add_argument(
        "--into_package",
        action="store_true",
        help="overwrite the shipped model of --name in the installed package",
    )
    parser.add_argument(
        "--config_arg", default="", help="extra i2ce_jax/pretrained/recipe.py arguments"
    )
    parser.add_argument("--export_only", action="store_true", help="export --workdir as it is")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    workdir = args.workdir or f"/tmp/i2ce_pretrained_{args.name}"
    out = str(PACKAGE_DIR / args.name) if args.into_package else args.out
    if not args.export_only:
        arg = ",".join(
            filter(None, [f"model={args.name}", f"data_dir={args.data_dir}", args.config_arg])
        )
        start = time.perf_counter()
        summary = train_and_evaluate(recipe.get_config(arg), workdir)
        print(f"trained in {time.perf_counter() - start:.0f} s: {json.dumps(summary)}")
    info = export(workdir, out)
    size = (Path(out) / WEIGHTS_FILE).stat().st_size
    where = f"the package's {args.name} model" if args.into_package else "a model folder"
    print(f"exported {out}/{WEIGHTS_FILE} ({where}): {size / 1e6:.1f} MB, sha256 {info['sha256']}")


if __name__ == "__main__":
    main()
