"""``python -m i2ce_jax.pretrained``: trains a packaged model's recipe (recipe.py) and exports it.

Kept apart from the package's ``load`` so that loading a model (the scorer)
never imports the trainer: i2ce_jax.train imports the scorer.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from i2ce_jax.pretrained import DEFAULT, NAMES, PACKAGE_DIR, WEIGHTS_FILE, export, recipe
from i2ce_jax.train import train_and_evaluate


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m i2ce_jax.pretrained", description="Train and export a packaged I2CE model."
    )
    parser.add_argument("--name", default=DEFAULT, choices=NAMES)
    parser.add_argument("--data_dir", default="../shared/data")
    parser.add_argument("--workdir", default=None, help="default: /tmp/i2ce_pretrained_NAME")
    parser.add_argument("--out", default=None, help="default: the package folder of --name")
    parser.add_argument(
        "--config_arg", default="", help="extra i2ce_jax/pretrained/recipe.py arguments"
    )
    parser.add_argument("--export_only", action="store_true", help="export --workdir as it is")
    args = parser.parse_args(argv)
    workdir = args.workdir or f"/tmp/i2ce_pretrained_{args.name}"
    out = args.out or str(PACKAGE_DIR / args.name)
    if not args.export_only:
        arg = ",".join(
            filter(None, [f"model={args.name}", f"data_dir={args.data_dir}", args.config_arg])
        )
        start = time.perf_counter()
        summary = train_and_evaluate(recipe.get_config(arg), workdir)
        print(f"trained in {time.perf_counter() - start:.0f} s: {json.dumps(summary)}")
    info = export(workdir, out)
    size = (Path(out) / WEIGHTS_FILE).stat().st_size
    print(f"exported {out}/{WEIGHTS_FILE}: {size / 1e6:.1f} MB, sha256 {info['sha256']}")
