"""Seconds of COCOEvalCap.bootstrap beyond the evaluations (issue 32 §2).

    python bench/quality/bootstrap_time.py [--images 5000] [--resamples 1000] [--rounds 3] [--write]

Two systems on ``--images`` COCO val2017 images (4 reference captions each): the
image's fifth caption, and the previous image's fifth caption. Both are evaluated
once (every metric, I2CE included, SPICE unavailable); then ``bootstrap`` with
``--resamples`` resamples (intervals for both, paired bootstrap and approximate
randomization for the second) is timed ``--rounds`` times. Prints a table: the
evaluation's seconds, the bootstrap's median [min, max], their ratio, and the load
average; ``--write`` puts it in bench/RESULTS.md ("Bootstrap over images").
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse
import json
import statistics
import tempfile
import time

from bench.harness import SHARED_DATA, load_average, update_section
from capsim.cache import use_compilation_cache
from capsim.metrics import cocoeval
from capsim.metrics.bootstrap import format_report
from capsim.tables import format_table
from i2ce_jax.cocoeval import SCORERS

SECTION = "## Bootstrap over images"
REFERENCES = 4


def write_systems(folder: Path, images: int) -> tuple[Path, Path, Path]:
    """The annotations and the two systems' results files."""
    payload = json.loads((SHARED_DATA / "coco" / "captions_val2017.json").read_text())
    by_image: dict[int, list[dict]] = {}
    for annotation in payload["annotations"]:
        by_image.setdefault(annotation["image_id"], []).append(annotation)
    chosen = sorted(i for i, anns in by_image.items() if len(anns) > REFERENCES)[:images]
    if len(chosen) < images:
        raise SystemExit(f"only {len(chosen)} val2017 images have {REFERENCES + 1} captions")
    fifth = [by_image[i][REFERENCES]["caption"] for i in chosen]
    annotations = folder / "captions.json"
    annotations.write_text(
        json.dumps(
            {
                "images": [{"id": i} for i in chosen],
                "annotations": [a for i in chosen for a in by_image[i][:REFERENCES]],
            }
        )
    )
    own, previous = folder / "own.json", folder / "previous.json"
    own.write_text(
        json.dumps([{"image_id": i, "caption": c} for i, c in zip(chosen, fifth, strict=True)])
    )
    previous.write_text(
        json.dumps([{"image_id": i, "caption": fifth[k - 1]} for k, i in enumerate(chosen)])
    )
    return annotations, own, previous


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="write the table to RESULTS.md")
    args = parser.parse_args(argv)
    use_compilation_cache()
    load_before = load_average()
    with tempfile.TemporaryDirectory() as folder:
        annotations, own, previous = write_systems(Path(folder), args.images)
        started = time.perf_counter()
        first, second = cocoeval.evaluate_systems(annotations, [own, previous], SCORERS)
        evaluation_seconds = (time.perf_counter() - started) / 2
    seconds = []
    for _ in range(args.rounds):
        started = time.perf_counter()
        report = first.bootstrap(args.resamples, seed=0, others={"previous": second}, name="own")
        seconds.append(time.perf_counter() - started)
    median = statistics.median(seconds)
    row = {
        "images": args.images,
        "resamples": args.resamples,
        "one evaluation s": f"{evaluation_seconds:.1f}",
        "bootstrap s, median [min, max]": f"{median:.2f} [{min(seconds):.2f}, {max(seconds):.2f}]",
        "bootstrap / evaluation": f"{median / evaluation_seconds:.3f}",
    }
    columns = list(row)
    text = (
        format_table([row], columns)
        + f"\n\n{args.rounds} rounds; load average {load_before:.2f} before, "
        f"{load_average():.2f} after. Every metric of both systems (BLEU-1..4, METEOR, "
        "ROUGE-L, CIDEr-D, I2CE) with intervals, and the paired tests of the second.\n\n"
        + "```\n"
        + format_report(report)
        + "\n```\n"
    )
    print(text)
    if args.write:
        command = "python bench/quality/bootstrap_time.py " + " ".join(argv or sys.argv[1:])
        update_section(SECTION, f"{SECTION}\n\nCommand: `{command.strip()}`\n\n{text}")


if __name__ == "__main__":
    main()
