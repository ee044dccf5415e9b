"""The generated long-caption pair set that metaeval_report.py and long_captions.py score:
paragraphs of 20 COCO captions, the worse of each pair with a quarter or a half of its
captions swapped for another paragraph's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bench.harness import SHARED_DATA

IMAGES_PER_DOCUMENT = 20
REFERENCES = 4
CATEGORIES = {"swap-1/4": 0.25, "swap-1/2": 0.5}


def write_long_pairs(path: Path, pairs: int, seed: int = 0) -> dict[str, float]:
    """The generated long-caption pair set (JSON lines); returns its paragraph lengths."""
    payload = json.loads((SHARED_DATA / "coco" / "captions_val2017.json").read_text())
    by_image: dict[int, list[str]] = {}
    for annotation in payload["annotations"]:
        by_image.setdefault(annotation["image_id"], []).append(annotation["caption"].strip())
    images = sorted(i for i, captions in by_image.items() if len(captions) > REFERENCES)
    documents = pairs // len(CATEGORIES)
    if documents * IMAGES_PER_DOCUMENT > len(images):
        raise SystemExit(f"--pairs {pairs} needs more than the {len(images)} COCO images")
    rng = np.random.default_rng(seed)
    rng.shuffle(images)
    groups = [
        images[d * IMAGES_PER_DOCUMENT : (d + 1) * IMAGES_PER_DOCUMENT] for d in range(documents)
    ]
    lengths, rows = [], []
    for d, group in enumerate(groups):
        references = [" ".join(by_image[i][k] for i in group) for k in range(REFERENCES)]
        better = [by_image[i][REFERENCES] for i in group]
        other = groups[(d + 1) % documents]
        for category, share in CATEGORIES.items():
            worse = list(better)
            for slot in rng.choice(len(group), int(share * len(group)), replace=False):
                worse[slot] = by_image[other[slot]][REFERENCES]
            row = {
                "id": f"{d}-{category}",
                "image": f"document {d}",
                "category": category,
                "references": references,
                "better": " ".join(better),
                "worse": " ".join(worse),
            }
            rows.append(row)
            lengths += [len(row["better"].split()), len(row["worse"].split())]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return {"mean": float(np.mean(lengths)), "min": min(lengths), "max": max(lengths)}
