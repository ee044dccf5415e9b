"""The whole caption-metric suite against pycocoevalcap's: ``COCOEvalCap.evaluate()`` of
i2ce_jax.cocoeval (capsim's evaluator with I2CE) and of pycocoevalcap (without SPICE) on
the same COCO-format files, then metric by metric. Run by ``python bench/throughput.py --only score``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from bench.harness import load_average, ratio_summary, spread_cell, time_rounds
from capsim.metrics import cocoeval as capsim_cocoeval
from capsim.metrics.bleu import Bleu
from capsim.metrics.cider import CiderD
from capsim.metrics.meteor import Meteor
from capsim.metrics.rouge import Rouge
from capsim.metrics.tokenizer import ptb_tokenize
from capsim.tables import format_cells
from i2ce_jax import cocoeval
from i2ce_jax.scorer import I2CEScorer

SUITE_METRICS = ("tokenise", "BLEU", "METEOR", "ROUGE-L", "CIDEr", "I2CE")
METEOR_PHASES = ("prepare", "compiled core")
GOAL_RATIO = 20  # issue 41: the whole evaluate() at 20x pycocoevalcap's on these files


def write_coco_files(gts: Mapping, res: Mapping, folder: Path) -> tuple[Path, Path]:
    """The candidates as a COCO captions file and a results file, one image per candidate."""
    keys = list(res)
    annotations = [
        {"image_id": i, "id": i * 100 + j, "caption": caption}
        for i, key in enumerate(keys)
        for j, caption in enumerate(gts[key])
    ]
    payload = {
        "info": {},
        "licenses": [],
        "type": "captions",
        "images": [{"id": i} for i in range(len(keys))],
        "annotations": annotations,
    }
    results = [{"image_id": i, "caption": res[key][0]} for i, key in enumerate(keys)]
    (folder / "captions.json").write_text(json.dumps(payload))
    (folder / "results.json").write_text(json.dumps(results))
    return folder / "captions.json", folder / "results.json"


class NoSpice:
    """pycocoevalcap's SPICE would download CoreNLP: the suite is compared without it."""

    def compute_score(self, gts: Mapping, res: Mapping) -> tuple[float, list[float]]:
        return 0.0, [0.0] * len(res)

    def method(self) -> str:
        return "SPICE"


def coco_evaluate(module: object, annotations: Path, results: Path) -> None:
    """``COCOEvalCap(coco, coco.loadRes(results)).evaluate()`` as users write it."""
    from pycocotools.coco import COCO

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        coco = COCO(str(annotations))
        predicted = coco.loadRes(str(results))
        evaluator = module.COCOEvalCap(coco, predicted)
        evaluator.params["image_id"] = predicted.getImgIds()
        evaluator.evaluate()


def _suite_metrics(gts: Mapping, res: Mapping) -> tuple[dict, dict]:
    """One function per metric for each side, in the order their evaluators run them."""
    from pycocoevalcap.bleu.bleu import Bleu as CocoBleu
    from pycocoevalcap.cider.cider import Cider as CocoCider
    from pycocoevalcap.meteor.meteor import Meteor as CocoMeteor
    from pycocoevalcap.rouge.rouge import Rouge as CocoRouge
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    tokens: dict = {}

    def ptb() -> None:
        tokenizer = PTBTokenizer()
        for side, captions in (("gts", gts), ("res", res)):
            coco_form = {k: [{"caption": c} for c in v] for k, v in captions.items()}
            tokens[side] = tokenizer.tokenize(coco_form)

    def theirs(scorer: Callable) -> Callable[[], None]:
        return lambda: scorer().compute_score(tokens["gts"], tokens["res"])

    ours_tokens: dict = {}

    def ours_tokenise() -> None:
        ours_tokens.update(gts=ptb_tokenize(gts), res=ptb_tokenize(res))

    def ours(scorer: Callable) -> Callable[[], None]:
        return lambda: scorer().compute_score(ours_tokens["gts"], ours_tokens["res"])

    coco = {
        "tokenise": ptb,
        "BLEU": theirs(lambda: CocoBleu(4)),
        "METEOR": theirs(CocoMeteor),  # a new JVM per evaluate(), as COCOEvalCap makes it
        "ROUGE-L": theirs(CocoRouge),
        "CIDEr": theirs(CocoCider),
    }
    capsim = {
        "tokenise": ours_tokenise,
        "BLEU": ours(lambda: Bleu(4)),
        "METEOR": ours(Meteor),
        "ROUGE-L": ours(Rouge),
        "CIDEr": ours(CiderD),
        "I2CE": lambda: I2CEScorer.pretrained().compute_score(gts, res),
    }
    return capsim, coco


@contextlib.contextmanager
def _meteor_phase_clocks(seconds: dict[str, float]):
    """Adds the seconds spent in each METEOR phase (METEOR_PHASES) to ``seconds`` while
    active, by wrapping the functions the scorer calls: the real call's own path."""
    from capsim.metrics.meteor import statistics

    targets = [
        (Meteor, "prepare", "prepare"),  # normalised captions, words, phrases: Python
        (statistics, "caption_statistics", "compiled core"),  # matchers, search, scores
    ]

    def clocked(function: Callable, phase: str) -> Callable:
        def run(*args, **kwargs):
            began = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                seconds[phase] = seconds.get(phase, 0.0) + time.perf_counter() - began

        return run

    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in targets]
    try:
        for (owner, name, phase), (_, _, original) in zip(targets, originals, strict=True):
            setattr(owner, name, clocked(original, phase))
        yield
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


def measure_suite(gts: Mapping, res: Mapping, *, rounds: int) -> dict:
    """capsim's ``COCOEvalCap.evaluate()`` (with I2CE) against pycocoevalcap's without SPICE,
    on the same COCO-format files in alternating rounds; then each metric alone, the same way.
    """
    import pycocoevalcap.eval as coco_eval

    with tempfile.TemporaryDirectory() as folder:
        files = write_coco_files(gts, res, Path(folder))
        coco_eval.Spice = NoSpice
        runners = {
            "capsim": lambda _: coco_evaluate(cocoeval, *files),
            "pycocoevalcap": lambda _: coco_evaluate(coco_eval, *files),
            # the drop-in alone: the same metrics as pycocoevalcap's without SPICE
            "capsim drop-in": lambda _: coco_evaluate(capsim_cocoeval, *files),
        }
        capsim_metrics, coco_metrics = _suite_metrics(gts, res)
        metric_seconds: dict = {"capsim": {}, "pycocoevalcap": {}}

        def by_metric(side: str, metrics: Mapping[str, Callable[[], None]]) -> Callable:
            def run(_: int) -> None:
                quiet = io.StringIO()  # pycocoevalcap prints its counts and the tokenizer's
                with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
                    for name, metric in metrics.items():
                        began = time.perf_counter()
                        metric()
                        metric_seconds[side].setdefault(name, []).append(
                            time.perf_counter() - began
                        )

            return run

        runners["capsim metrics"] = by_metric("capsim", capsim_metrics)
        runners["pycocoevalcap metrics"] = by_metric("pycocoevalcap", coco_metrics)
        phases: dict[str, list[float]] = {}

        def meteor_phases(_: int) -> None:
            tokens = {"gts": ptb_tokenize(gts), "res": ptb_tokenize(res)}
            clocks: dict[str, float] = {}
            began = time.perf_counter()
            with _meteor_phase_clocks(clocks):  # one process: the phases of every caption
                Meteor(threads=1).compute_score(tokens["gts"], tokens["res"])
            clocks["whole"] = time.perf_counter() - began
            for phase, spent in clocks.items():
                phases.setdefault(phase, []).append(spent)

        runners["capsim METEOR phases"] = meteor_phases
        for run in runners.values():
            run(0)  # the paraphrase index, the encoder's compiles, the JVM's class files
        for side in (*metric_seconds.values(), phases):
            side.clear()
        load_start = load_average()
        seconds = time_rounds(runners, rounds)
        load_end = load_average()
    return {
        "candidates": len(res),
        "capsim": seconds["capsim"],
        "pycocoevalcap": seconds["pycocoevalcap"],
        **ratio_summary(seconds["capsim"], seconds["pycocoevalcap"]),
        "drop_in": seconds["capsim drop-in"],
        "drop_in_ratio": ratio_summary(seconds["capsim drop-in"], seconds["pycocoevalcap"]),
        "metrics": metric_seconds,
        "meteor_phases": phases,
        "rounds": rounds,
        "load_start": load_start,
        "load_end": load_end,
    }


def suite_table(row: Mapping) -> str:
    def cell(seconds: Sequence[float] | None) -> str:
        return spread_cell(seconds) if seconds else "-"

    cells = []
    for metric in SUITE_METRICS:
        ours = row["metrics"]["capsim"].get(metric)
        theirs = row["metrics"]["pycocoevalcap"].get(metric)
        ratio = f"{np.median(theirs) / np.median(ours):.1f}" if ours and theirs else "-"
        cells.append([metric, cell(ours), cell(theirs), ratio])
    same = row["drop_in_ratio"]
    cells += [
        [
            "whole `evaluate()`, I2CE included",
            cell(row["capsim"]),
            cell(row["pycocoevalcap"]),
            f"**{row['ratio_median']:.2f}** ({row['ratio_min']:.2f}-{row['ratio_max']:.2f})",
        ],
        [
            "whole `evaluate()`, the same metrics (the drop-in without I2CE)",
            cell(row["drop_in"]),
            cell(row["pycocoevalcap"]),
            f"**{same['ratio_median']:.2f}** ({same['ratio_min']:.2f}-{same['ratio_max']:.2f})",
        ],
    ]
    return format_cells(
        ["metric", "capsim s (median, min-max)", "pycocoevalcap s (median, min-max)", "ratio"],
        cells,
    )


def meteor_phase_table(row: Mapping) -> str:
    """capsim's METEOR call phase by phase (timed inside the call), with the rest."""
    phases = row["meteor_phases"]
    whole = np.median(phases["whole"])
    rest = np.subtract(phases["whole"], np.sum([phases[p] for p in METEOR_PHASES], axis=0))

    def cells(name: str, seconds: Sequence[float], share: str) -> list[str]:
        return [
            name,
            f"{np.median(seconds):.2f}",
            f"{min(seconds):.2f}",
            f"{max(seconds):.2f}",
            share,
        ]

    return format_cells(
        ["METEOR phase", "s median", "min", "max", "share of the call"],
        [
            *(
                cells(name, seconds, f"{np.median(seconds) / whole:.0%}")
                for name, seconds in (*((p, phases[p]) for p in METEOR_PHASES), ("rest", rest))
            ),
            cells("whole `Meteor().compute_score`", phases["whole"], "100%"),
        ],
    )


def goal_budget(row: Mapping) -> str:
    """Where this run stands against the goal (GOAL_RATIO), from its medians."""
    budget = np.median(row["pycocoevalcap"]) / GOAL_RATIO
    ours = np.median(row["capsim"])
    standing = "within it" if ours <= budget else f"{ours - budget:.2f} s over it"
    drop_in = np.median(row["drop_in"])
    drop_in_standing = "within it" if drop_in <= budget else f"{drop_in - budget:.2f} s over it"
    meteor = np.median(row["metrics"]["capsim"]["METEOR"])
    alone = np.median(row["meteor_phases"]["whole"])
    return (
        f"At {GOAL_RATIO}x, the whole `evaluate()` may take {budget:.2f} s (pycocoevalcap's "
        f"median / {GOAL_RATIO}); capsim's takes {ours:.2f} s with I2CE, {standing}, and "
        f"{drop_in:.2f} s with the same metrics as pycocoevalcap's, {drop_in_standing}. "
        "METEOR takes "
        f"{meteor:.2f} s as `evaluate()` runs it (its threads) and {alone:.2f} s in one "
        "process with one thread."
    )


def suite_available() -> bool:
    """pycocoevalcap, pycocotools and Java: what the suite's reference side needs."""
    needed = ("pycocoevalcap", "pycocotools")
    return shutil.which("java") is not None and all(importlib.util.find_spec(m) for m in needed)
