"""Where scoring time goes: the I2CE scorer part by part, and the whole caption-metric suite
(capsim.metrics.cocoeval.COCOEvalCap) against pycocoevalcap's, metric by metric.

Run by ``python bench/throughput.py --only score`` beside the scoring ratios
(bench/throughput_tables/scoring.py), on the same Flickr8k-Expert candidates.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import jax
import numpy as np
from flax import nnx

from bench import harness
from bench.cases import flops
from bench.harness import load_average, spread_cell, time_rounds
from bench.throughput_tables.metric_suite import goal_budget, meteor_phase_table, suite_table
from capsim.embed import Embedded, bucketed_batches, encode_batches, token_rows
from capsim.tables import format_cells
from i2ce_jax.scorer import I2CEScorer, SentenceTable, unit_vectors_and_norms, validate_gts_res

ROLLED = "encoder with the GRU loop rolled (not in the call)"
I2CE_PARTS = ("checks", "distinct sentences", "tokenise", "batching", "encoder", "pooling")


def _encoder_flops(scorer: I2CEScorer, batches: Sequence, rows: Sequence) -> tuple[int, int]:
    """Matmul FLOPs of the encoder on the padded batches, and on the real tokens alone."""
    cells = [c for c in (scorer.encoder.cell, scorer.encoder.backward_cell) if c is not None]

    def gru(batch: int, steps: int) -> int:
        return sum(
            flops.rnn_flops("gru", batch, steps, c.in_features, c.hidden_features).forward
            for c in cells
        )

    padded = sum(gru(*ids.shape) for _, ids, _ in batches)
    real = sum(gru(1, len(row)) for row in rows if row is not None)
    return padded, real


def measure_scorer_parts(
    scorer: I2CEScorer, gts: Mapping, res: Mapping, *, rounds: int, peak: float
) -> dict:
    """Seconds of each part of ``scorer.score`` run one after the other, and of the whole call,
    in alternating rounds; the rest (whole minus parts) is the glue between them."""
    times: dict[str, list[float]] = {part: [] for part in (*I2CE_PARTS, ROLLED)}
    shapes: dict = {}
    # The lever beside the parts: the same batches with the GRU's time loop not unrolled.
    rolled_encoder = nnx.clone(scorer.encoder)
    rolled_encoder.unroll = False  # set by capsim.embed.module_encoder
    rolled = jax.jit(lambda ids, mask: unit_vectors_and_norms(rolled_encoder, ids, mask))

    def parts(_: int) -> None:
        clock = time.perf_counter()

        def lap(part: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            times[part].append(now - clock)
            clock = now

        validate_gts_res(gts, res)
        lap("checks")
        table = SentenceTable.of(gts, res)
        lap("distinct sentences")
        rows = token_rows(scorer.vocab, table.sentences, table.names)
        lap("tokenise")
        batches = list(bucketed_batches(rows, scorer.batch_size))
        lap("batching")
        vectors = encode_batches(scorer.encode_batch, batches, len(rows))
        lap("encoder")
        empty = np.array([i for i, row in enumerate(rows) if row is None], np.int64)
        scorer.pool(table, Embedded(vectors, empty))
        lap("pooling")
        shapes.update(rows=rows, batches=batches, sentences=len(rows))
        encode_batches(rolled, batches, len(rows))
        lap(ROLLED)

    runners = {"parts": parts, "whole": lambda _: scorer.compute_score(gts, res)}
    for run in runners.values():
        run(0)  # compiles every batch shape
    for part in times.values():
        part.clear()
    load_start = load_average()
    seconds = time_rounds(runners, rounds)
    load_end = load_average()
    padded, real = _encoder_flops(scorer, shapes["batches"], shapes["rows"])
    encoder = float(np.median(times["encoder"]))
    whole = np.asarray(seconds["whole"])
    rest = whole - np.sum([times[p] for p in I2CE_PARTS], axis=0)
    return {
        "candidates": len(res),
        "sentences": shapes["sentences"],
        "batches": len(shapes["batches"]),
        "batch_size": scorer.batch_size,
        "padded_tokens": sum(ids.size for _, ids, _ in shapes["batches"]),
        "real_tokens": sum(len(r) for r in shapes["rows"] if r is not None),
        "parts": {p: times[p] for p in I2CE_PARTS} | {"rest": rest.tolist()},
        "rolled": times[ROLLED],
        "whole": whole.tolist(),
        "encoder_gflops_padded": padded / encoder / 1e9,
        "encoder_gflops_real": real / encoder / 1e9,
        "peak_gflops": peak / 1e9,
        "rounds": rounds,
        "load_start": load_start,
        "load_end": load_end,
    }


def scorer_parts_table(row: Mapping) -> str:
    whole = float(np.median(row["whole"]))

    def cells(name: str, seconds: Sequence[float]) -> list[str]:
        ms = np.asarray(seconds) * 1e3
        share = f"{np.median(ms) / 1e3 / whole:.0%}"
        return [name, f"{np.median(ms):.1f}", f"{ms.min():.1f}", f"{ms.max():.1f}", share]

    rolled = [f"*{cell}*" for cell in cells(ROLLED, row["rolled"])]
    last = [
        *cells("whole `compute_score`", row["whole"])[:4],
        f"{row['candidates'] / whole:.0f} captions/s",
    ]
    return format_cells(
        ["part", "ms median", "min", "max", "share of the call"],
        [*(cells(part, seconds) for part, seconds in row["parts"].items()), rolled, last],
    )


FIRST_CALL = """
import json, sys, time
began = time.perf_counter()
from i2ce_jax.scorer import I2CEScorer
from capsim.cache import use_compilation_cache
use_compilation_cache()
rows = json.load(open(sys.argv[1]))["rows"]
gts = {r["key"]: r["references"] for r in rows}
res = {r["key"]: [r["candidate"]] for r in rows}
scorer = I2CEScorer.pretrained()
loaded = time.perf_counter()
scorer.compute_score(gts, res)
print(json.dumps({"import_and_load": loaded - began, "first_call": time.perf_counter() - loaded}))
"""


def measure_first_call(golden: Path, *, rounds: int) -> dict:
    """A fresh process's first ``compute_score`` (its compiles), with an empty compilation
    cache and with the one the previous run left (capsim.cache)."""
    times: dict[str, list[dict]] = {"empty cache": [], "cache of the previous run": []}
    with tempfile.TemporaryDirectory() as folder:
        for index in range(rounds):
            env = {**os.environ, "CAPSIM_CACHE_DIR": f"{folder}/{index}"}
            env.pop("JAX_COMPILATION_CACHE_DIR", None)
            for kind in times:
                done = subprocess.run(
                    [sys.executable, "-c", FIRST_CALL, str(golden)],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                    cwd=harness.REPO,
                )
                times[kind].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return times


def first_call_table(times: Mapping[str, list[dict]]) -> str:
    return format_cells(
        ["compilation cache", "import and load s", "first call s (median, min-max)"],
        [
            [
                kind,
                f"{np.median([r['import_and_load'] for r in runs]):.1f}",
                spread_cell([r["first_call"] for r in runs]),
            ]
            for kind, runs in times.items()
        ],
    )


def details_section(parts: Mapping, suite: Mapping | None, first: Mapping | None) -> str:
    """The markdown under the scoring ratios: the scorer's parts, the suite, the first call."""
    p = parts
    share = p["encoder_gflops_padded"] / p["peak_gflops"]
    text = f"""Where the I2CE scorer's time goes (`bench/throughput_tables/scorer_parts.py`, `measure_scorer_parts`): the
parts of `I2CEScorer.score` run one after the other, and the whole call, in {p["rounds"]}
alternating rounds (load {p["load_start"]:.2f} / {p["load_end"]:.2f}). {p["candidates"]} candidates
hold {p["sentences"]} distinct sentences, encoded in {p["batches"]} batches of up to
{p["batch_size"]} rows: {p["real_tokens"]} real tokens padded to {p["padded_tokens"]}
({1 - p["real_tokens"] / p["padded_tokens"]:.0%} padding). The encoder runs
{p["encoder_gflops_padded"]:.0f} GFLOP/s on the padded batches ({share:.0%} of the
{p["peak_gflops"]:.0f} GFLOP/s matmul peak measured in this run) and
{p["encoder_gflops_real"]:.0f} GFLOP/s of useful work. The rest is the whole call minus its
parts timed one by one in the same round: the glue between them, within the rounds' noise
(negative where a whole call ran faster than its parts). The row in italics times the same batches with the GRU's time
loop rolled, as it was before `capsim.embed.module_encoder` had it unrolled.

{scorer_parts_table(parts)}
"""
    if suite:
        text += f"""
The whole suite (`measure_suite`): `COCOEvalCap(coco, coco.loadRes(results)).evaluate()` of
`capsim.metrics.cocoeval` (PTB tokenisation, BLEU-1..4, METEOR, ROUGE-L, CIDEr-D and I2CE) against
pycocoevalcap's (its Java PTBTokenizer, BLEU, METEOR jar, ROUGE-L, CIDEr; SPICE left out), both
on the same COCO-format files of these candidates (one image per candidate, its 5 references),
as users call them, in {suite["rounds"]} alternating rounds after a warmup round (load
{suite["load_start"]:.2f} / {suite["load_end"]:.2f}). Each metric is then timed alone the same
way (pycocoevalcap's METEOR starts its JVM, as every `evaluate()` does; I2CE loads the packaged
model).

{suite_table(suite)}

METEOR phase by phase (`capsim.metrics.meteor`, one process, one thread; each phase timed inside
a real call, in the same rounds): preparing the call's arrays in Python (normalisation, word
tables, the paraphrase-table spans and links) and the compiled core (the matchers, the jar's
alignment search, the statistics and scores); the rest is the checks and the corpus score.
{goal_budget(suite)}

{meteor_phase_table(suite)}
"""
    if first:
        text += f"""
A fresh process's first `compute_score` on these candidates compiles the encoder for each batch
shape (`measure_first_call`, {len(next(iter(first.values())))} rounds, each with a new cache
folder). The scoring commands turn on JAX's persistent compilation cache (`capsim.cache`), so
from their second run on a machine the shapes load instead:

{first_call_table(first)}
"""
    return text
