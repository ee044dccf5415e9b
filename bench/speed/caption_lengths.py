"""Caption-metric cost against caption length: METEOR alone against the warm jar, and the
whole ``COCOEvalCap.evaluate()`` against pycocoevalcap's, on paragraphs of N words.

    python bench/speed/caption_lengths.py [--pairs 300] [--words 10,20,40,80,160] [--rounds 5]
                                    [--images 500] [--threads 1,2,4]

Paragraphs are built from COCO val2017's dev captions: the candidate of image k is
the first caption of images k, k+1, ... joined, and its one reference is the second
caption of the same images, in the same order, each cut to its first N PTB tokens
(the tokens METEOR sees inside ``evaluate()``). Every row times both sides on the
same pairs in alternating rounds; the ratio is taken per round and reported as the
median with min and max, beside the load average. Rows:

- METEOR alone: ``capsim.metrics.meteor.Meteor`` in one process, with one thread and with
  its default threads, against pycocoevalcap's ``Meteor`` (one warm JVM for the whole
  run, warmed on each length first), ms per pair and jar / capsim;
- METEOR with 1, 2 and 4 threads on the longest paragraphs (on 2 cores, 4 shows the
  overhead);
- the whole ``evaluate()`` of capsim's ``COCOEvalCap`` (without I2CE, as pycocoevalcap
  has none) against pycocoevalcap's without SPICE, on ``--images`` paragraphs.

Writes bench/results/caption_lengths.json and the "## Caption metrics against caption
length" section of bench/RESULTS.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ is used from the clone, not installed: make its root importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse
import json
import tempfile
from collections.abc import Mapping

import numpy as np

from bench import harness
from bench.harness import load_cell
from bench.throughput_tables.metric_suite import NoSpice, coco_evaluate, write_coco_files
from capsim.metrics import cocoeval
from capsim.metrics.meteor import Meteor
from capsim.metrics.tokenizer import ptb_tokenize
from capsim.tables import format_cells

SECTION = "## Caption metrics against caption length"
COCO_CAPTIONS = harness.SHARED_DATA / "coco" / "captions_val2017.json"
MIN_CAPTIONS = 2  # the candidate's caption and the reference's, of each image


def paragraphs(count: int, words: int) -> tuple[dict, dict]:
    """``count`` (candidate, reference) paragraphs of ``words`` PTB tokens, as gts/res."""
    by_image: dict[int, list[str]] = {}
    for row in json.loads(COCO_CAPTIONS.read_text())["annotations"]:
        by_image.setdefault(row["image_id"], []).append(" ".join(row["caption"].split()))
    images = [captions for _, captions in sorted(by_image.items()) if len(captions) >= 2]
    tokens = ptb_tokenize({k: captions[:MIN_CAPTIONS] for k, captions in enumerate(images)})
    gts, res = {}, {}
    for k in range(count):
        sides = []
        for side in range(MIN_CAPTIONS):
            text: list[str] = []
            at = k
            while len(text) < words:
                text += tokens[at % len(images)][side].split()
                at += 1
            sides.append(" ".join(text[:words]))
        res[k], gts[k] = [sides[0]], [sides[1]]
    return gts, res


def meteor_rows(lengths: list[int], pairs: int, rounds: int, jar) -> list[dict]:
    """METEOR alone per length: capsim in one process, with one thread and with its default
    threads (the cores, up to 4), against the warm jar."""
    one, default = Meteor(threads=1), Meteor()
    rows = []
    for words in lengths:
        gts, res = paragraphs(pairs, words)
        for warm in (one, default, jar):  # compiles, loads the index, warms the JVM's compiler
            warm.compute_score(gts, res)
        load_start = harness.load_average()
        seconds = harness.time_rounds(
            {
                "capsim": lambda _, g=gts, r=res: one.compute_score(g, r),
                "jar": lambda _, g=gts, r=res: jar.compute_score(g, r),
                "capsim threads": lambda _, g=gts, r=res: default.compute_score(g, r),
            },
            rounds,
        )
        threaded = harness.ratio_summary(seconds["capsim threads"], seconds["jar"])
        rows.append(
            {
                "what": "meteor",
                "words": words,
                "pairs": pairs,
                "capsim_ms_per_pair": 1e3 * float(np.median(seconds["capsim"])) / pairs,
                "jar_ms_per_pair": 1e3 * float(np.median(seconds["jar"])) / pairs,
                **harness.ratio_summary(seconds["capsim"], seconds["jar"]),
                "threads": default._threads,
                "threads_ms_per_pair": 1e3 * float(np.median(seconds["capsim threads"])) / pairs,
                **{f"threads_{key}": value for key, value in threaded.items()},
                "load_start": load_start,
                "load_end": harness.load_average(),
            }
        )
        print(meteor_table(rows[-1:]), flush=True)
    return rows


def thread_rows(words: int, pairs: int, rounds: int, counts: list[int]) -> list[dict]:
    """METEOR on the same paragraphs with 1, 2, 4... threads, against the first count."""
    gts, res = paragraphs(pairs, words)
    scorers = {n: Meteor(threads=n) for n in counts}
    for scorer in scorers.values():
        scorer.compute_score(gts, res)
    load_start = harness.load_average()
    seconds = harness.time_rounds(
        {n: lambda _, s=s: s.compute_score(gts, res) for n, s in scorers.items()}, rounds
    )
    base = seconds[counts[0]]
    return [
        {
            "what": "threads",
            "words": words,
            "pairs": pairs,
            "threads": n,
            "ms_per_pair": 1e3 * float(np.median(seconds[n])) / pairs,
            **harness.ratio_summary(seconds[n], base),
            "load_start": load_start,
            "load_end": harness.load_average(),
        }
        for n in counts
    ]


def evaluate_rows(lengths: list[int], images: int, rounds: int) -> list[dict]:
    """The whole evaluate() of both on ``images`` paragraphs of each length."""
    import pycocoevalcap.eval as coco_eval

    coco_eval.Spice = NoSpice  # SPICE would download CoreNLP: compared without it
    rows = []
    for words in lengths:
        gts, res = paragraphs(images, words)
        with tempfile.TemporaryDirectory() as folder:
            files = write_coco_files(gts, res, Path(folder))
            runners = {
                "capsim": lambda _, f=files: coco_evaluate(cocoeval, *f),
                "pycocoevalcap": lambda _, f=files: coco_evaluate(coco_eval, *f),
            }
            for run in runners.values():
                run(0)
            load_start = harness.load_average()
            seconds = harness.time_rounds(runners, rounds)
        rows.append(
            {
                "what": "evaluate",
                "words": words,
                "images": images,
                "capsim_s": float(np.median(seconds["capsim"])),
                "pycocoevalcap_s": float(np.median(seconds["pycocoevalcap"])),
                **harness.ratio_summary(seconds["capsim"], seconds["pycocoevalcap"]),
                "load_start": load_start,
                "load_end": harness.load_average(),
            }
        )
        print(evaluate_table(rows[-1:]), flush=True)
    return rows


def _ratio(row: Mapping) -> str:
    return f"**{row['ratio_median']:.1f}×** ({row['ratio_min']:.1f}-{row['ratio_max']:.1f})"


def meteor_table(rows: list[dict]) -> str:
    threads = rows[0]["threads"]
    columns = [
        "words",
        "pairs",
        "jar ms/pair",
        "capsim ms/pair, 1 thread",
        "jar / capsim, 1 thread",
        f"capsim ms/pair, {threads} threads",
        f"jar / capsim, {threads} threads",
        "load",
    ]
    cells = []
    for row in rows:
        threaded = {key[len("threads_") :]: row[key] for key in row if key.startswith("threads_")}
        cells.append(
            [
                row["words"],
                row["pairs"],
                f"{row['jar_ms_per_pair']:.3f}",
                f"{row['capsim_ms_per_pair']:.3f}",
                _ratio(row),
                f"{row['threads_ms_per_pair']:.3f}",
                _ratio(threaded),
                load_cell(row),
            ]
        )
    return format_cells(columns, cells)


def thread_table(rows: list[dict]) -> str:
    return format_cells(
        ["threads", "words", "pairs", "ms/pair", "speed against 1 thread", "load"],
        [
            [
                row["threads"],
                row["words"],
                row["pairs"],
                f"{row['ms_per_pair']:.3f}",
                _ratio(row),
                load_cell(row),
            ]
            for row in rows
        ],
    )


def evaluate_table(rows: list[dict]) -> str:
    return format_cells(
        ["words", "images", "capsim s", "pycocoevalcap s", "pycocoevalcap / capsim", "load"],
        [
            [
                row["words"],
                row["images"],
                f"{row['capsim_s']:.2f}",
                f"{row['pycocoevalcap_s']:.2f}",
                _ratio(row),
                load_cell(row),
            ]
            for row in rows
        ],
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=300, help="METEOR pairs per length")
    parser.add_argument("--words", default="10,20,40,80,160", help="paragraph lengths")
    parser.add_argument("--rounds", type=int, default=harness.ROUNDS)
    parser.add_argument("--images", type=int, default=500, help="paragraphs in evaluate()")
    parser.add_argument("--threads", default="1,2,4", help="METEOR thread counts")
    parser.add_argument("--skip", default="", help="comma list of meteor,threads,evaluate")
    args = parser.parse_args(argv)
    lengths = [int(w) for w in args.words.split(",")]
    skip = set(filter(None, args.skip.split(",")))

    from pycocoevalcap.meteor.meteor import Meteor as JarMeteor

    rows: list[dict] = []
    text = []
    if "meteor" not in skip:
        jar = JarMeteor()
        meteor = meteor_rows(lengths, args.pairs, args.rounds, jar)
        del jar  # pycocoevalcap's Meteor stops its JVM when collected
        rows += meteor
        text += ["METEOR alone, one process, against the warm jar:", "", meteor_table(meteor)]
    if "threads" not in skip:
        counts = [int(n) for n in args.threads.split(",")]
        scaling = thread_rows(max(lengths), 4 * args.pairs, args.rounds, counts)
        rows += scaling
        text += ["", "METEOR by thread count, one process:", "", thread_table(scaling)]
    if "evaluate" not in skip:
        whole = evaluate_rows(lengths, args.images, args.rounds)
        rows += whole
        text += [
            "",
            "The whole `COCOEvalCap.evaluate()` against pycocoevalcap's (no SPICE):",
            "",
            evaluate_table(whole),
        ]
    body = "\n".join(text)
    print("\n" + body)
    harness.record_results("caption_lengths", rows, SECTION, body)


if __name__ == "__main__":
    main()
