"""bench/throughput.py's scoring rows: the I2CE scorer and capsim's n-gram metrics against
pycocoevalcap and all-MiniLM-L6-v2, on the Flickr8k-Expert candidates."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import shutil
from collections.abc import Mapping, Sequence

import numpy as np
from pycocoevalcap.bleu.bleu import Bleu as CocoBleu
from pycocoevalcap.cider.cider import Cider as CocoCider
from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

from bench import harness, minilm
from bench.harness import (
    load_average,
    ratio_summary,
    ratio_table,
    time_rounds,
    update_section,
)
from capsim.metrics.bleu import Bleu
from capsim.metrics.cider import CiderD
from capsim.metrics.tokenizer import ptb_tokenize
from i2ce_jax import pretrained
from i2ce_jax.scorer import I2CEScorer

RESULTS_JSON = harness.RESULTS_DIR / "throughput.json"
SCORING_SECTION = "## Scoring throughput"
BLEU_ORDER = 4


def _coco_bleu_cider(gts: Mapping, res: Mapping) -> None:
    with contextlib.redirect_stdout(io.StringIO()):  # pycocoevalcap prints its BLEU counts
        CocoBleu(BLEU_ORDER).compute_score(gts, res, verbose=0)
    CocoCider().compute_score(gts, res)


def _coco_as_users_run_it(gts: Mapping, res: Mapping) -> None:
    """pycocoevalcap's usual recipe: its Java PTBTokenizer on the raw text, then Bleu+Cider."""
    tokenizer = PTBTokenizer()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        gts_tok = tokenizer.tokenize({k: [{"caption": c} for c in v] for k, v in gts.items()})
        res_tok = tokenizer.tokenize({k: [{"caption": c} for c in v] for k, v in res.items()})
    _coco_bleu_cider(gts_tok, res_tok)


def _capsim_bleu_cider(gts: Mapping, res: Mapping) -> None:
    Bleu(BLEU_ORDER).compute_score(gts, res)
    CiderD().compute_score(gts, res)


def _pretokenised(captions: Mapping) -> dict:
    """The text pycocoevalcap's PTBTokenizer returns (capsim's tokenizer matches it)."""
    return ptb_tokenize(captions)


def measure_scoring(
    gts: Mapping, res: Mapping, *, rounds: int = harness.ROUNDS, scorer: I2CEScorer | None = None
) -> list[dict]:
    """Captions/s of the I2CE scorer (and capsim's n-gram metrics) against pycocoevalcap.

    Each round times every scorer once on all candidates, in alternating order;
    a row's ratio is taken per round, then summarised as median, min and max.
    The warmup round compiles every length bucket the candidates need.
    """
    scorer = scorer or I2CEScorer.pretrained()
    gts_tok, res_tok = _pretokenised(gts), _pretokenised(res)
    runners = {
        "i2ce": lambda: scorer.compute_score(gts, res),
        "capsim_pretok": lambda: _capsim_bleu_cider(gts_tok, res_tok),
        "coco_pretok": lambda: _coco_bleu_cider(gts_tok, res_tok),
    }
    java = shutil.which("java") is not None
    if java:
        runners["coco_ptb"] = lambda: _coco_as_users_run_it(gts, res)
    if minilm.available():
        runners["minilm"] = functools.partial(minilm.MiniLMScorer().compute_score, gts, res)
    for run in runners.values():
        run()
    load_start = load_average()
    seconds = time_rounds({name: lambda i, run=run: run() for name, run in runners.items()}, rounds)
    load_end = load_average()
    pairs = [
        (
            "I2CE-score-vs-coco-ptb",
            "i2ce",
            "coco_ptb",
            "I2CE scorer (packaged model, raw text) vs pycocoevalcap PTBTokenizer (Java) + Bleu(4) + Cider, as users run it",
        ),
        (
            "I2CE-score-vs-coco-pretokenised",
            "i2ce",
            "coco_pretok",
            "I2CE scorer (packaged model, raw text) vs pycocoevalcap Bleu(4) + Cider on pre-tokenised text",
        ),
        (
            "I2CE-score-vs-MiniLM",
            "i2ce",
            "minilm",
            "I2CE scorer (packaged model) vs all-MiniLM-L6-v2 top-3 cosine (sentence-transformers, "
            "CPU torch), both on raw text, each distinct sentence encoded once",
        ),
        (
            "capsim-ngram-vs-coco-pretokenised",
            "capsim_pretok",
            "coco_pretok",
            "capsim Bleu(4) + CIDEr-D vs pycocoevalcap Bleu(4) + Cider, both on pre-tokenised text",
        ),
    ]
    rows = []
    for name, ours, reference, description in pairs:
        if reference not in seconds:
            why = minilm.INSTALL_HINT if reference == "minilm" else "no Java for the PTBTokenizer"
            print(f"{name}: skipped ({why})")
            continue
        rows.append(
            {
                "name": name,
                "what": "score",
                "description": description,
                "ours": len(res) / float(np.median(seconds[ours])),
                "reference": len(res) / float(np.median(seconds[reference])),
                **ratio_summary(seconds[ours], seconds[reference]),
                "rounds": rounds,
                "candidates": len(res),
                "load_start": load_start,
                "load_end": load_end,
            }
        )
    return rows


def scoring_table(rows: Sequence[Mapping]) -> str:
    return ratio_table(rows, "captions/s")


def write_scoring_results(
    command: str, rows: list[dict], model: str, details: str = "", measured: dict | None = None
) -> str:
    """The "## Scoring throughput" section, and the score rows of throughput.json; another
    packaged model than the default gets a section and a JSON entry of its own."""
    table = scoring_table(rows)
    title = SCORING_SECTION if model == pretrained.DEFAULT else f"{SCORING_SECTION}: {model}"
    descriptions = "\n".join(f"- `{r['name']}`: {r['description']}." for r in rows)
    n = rows[0]
    section = f"""{title}

Command: `{command}`

All {n["candidates"]} Flickr8k-Expert (image, candidate) pairs with their 5 references; the
I2CE model is the packaged `{model}` model, which deduplicates sentences and encodes each
once. Each of {n["rounds"]} rounds times every scorer once (alternating order) after a warmup
round; the ratio is ours / reference captions/s per round, summarised as median, min and max.
The machine is shared (2 cores): the load average at the start and the end is in the table.

{descriptions}

{table}
{details and chr(10) + details}"""
    update_section(title, section)
    previous = json.loads(RESULTS_JSON.read_text()) if RESULTS_JSON.exists() else {"rows": []}
    if measured:
        previous["scoring_parts" if model == pretrained.DEFAULT else f"scoring_parts_{model}"] = (
            measured
        )
    if model != pretrained.DEFAULT:
        previous[f"scoring_{model}"] = {"command": command, "rows": rows}
        RESULTS_JSON.write_text(json.dumps(previous, indent=2) + "\n")
        return table
    kept = [
        r
        for r in previous["rows"]
        if r.get("what") != "score" and "captions/s" not in r.get("what", "")
    ]
    previous["rows"] = kept + rows
    previous["scoring_command"] = command
    RESULTS_JSON.write_text(json.dumps(previous, indent=2) + "\n")
    return table
