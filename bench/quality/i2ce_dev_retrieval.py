"""Held-out caption retrieval: a finer dev measure than same-image AUC for choosing I2CE models.

    python bench/quality/i2ce_dev_retrieval.py --data_dir ../shared/data --run NAME=DIR ... \
        [--pretrained base,large,research] [--tag levers]

``DIR`` is a training workdir (its best checkpoint) or an exported model folder.

Same-image AUC (the early-stopping measure) compares same-image caption pairs
with random pairs; near 98.8 it stops telling candidates apart (its standard
error is about 0.3). Here every dev caption queries the other captions of its
split, each image scored by its nearest caption (the query left out), and a hit
is the query's own image: MRR and R@1, × 100, per split and their mean. Random
pairs are mostly easy; this counts every dev caption that sits nearer a caption
of another image than all four of its own, which is what hard negatives train
against. The splits are the ones every candidate's early stopping watched
(``dev_coco``: 500 COCO val2017 images; ``dev_flickr``: Flickr30k's val split);
no human judgment is read. Writes bench/results/i2ce_dev_retrieval[_TAG].json
and a RESULTS.md section.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.quality.dev_captions import (
    dev_splits,
    evaluate,
    model_loaders,
    model_parser,
    model_table,
    record_dev_rows,
)


def main() -> None:
    args = model_parser(__doc__.split("\n\n")[0]).parse_args()
    logging.getLogger().setLevel(logging.WARNING)
    splits = dev_splits(args.data_dir)
    scorers = model_loaders(args, "I2CE-pretrained-")
    rows = {}
    for name, make in scorers.items():
        rows[name] = evaluate(make(), splits)
        print(f"{name}: {json.dumps(rows[name])}", flush=True)

    columns = [f"{s}_{k}" for k in ("mrr", "r1") for s in [*splits, "mean"]]
    table = model_table(rows, columns)
    record_dev_rows(
        "i2ce_dev_retrieval",
        "## I2CE dev caption retrieval",
        splits,
        rows,
        ": each queries the others of its split; an image scores as its nearest caption, a hit "
        f"is the query's own image (× 100).\n\n{table}",
        args.tag,
    )
    print(table)


if __name__ == "__main__":
    main()
