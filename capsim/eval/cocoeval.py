"""pycocoevalcap's ``COCOEvalCap`` as a drop-in, in Python, with I2CE beside the standard metrics.

    from capsim.eval.cocoeval import COCOEvalCap   # was: from pycocoevalcap.eval import ...
    evaluator = COCOEvalCap(coco, coco.loadRes("results.json"))
    evaluator.params["image_id"] = evaluator.cocoRes.getImgIds()
    evaluator.evaluate()            # .eval, .imgToEval, .evalImgs as pycocoevalcap fills them

    python -m capsim.eval.cocoeval --annotations captions.json --results results.json [--out F]

The PTB tokenisation comes from capsim.eval.ptb (the jar's tokens on every caption
of the differential tests), BLEU-1..4, ROUGE-L and CIDEr-D from capsim.eval.ngram
and METEOR 1.5 from capsim.eval.meteor (the jar's score on every caption of the
differential tests); no Java is needed. ``I2CE`` is the packaged ``base`` model's score
(capsim's one import of i2ce_jax, made when it runs), computed in a thread beside the
other metrics. SPICE runs through pycocoevalcap's Java SPICE
when Stanford CoreNLP is installed beside it; otherwise ``.eval["SPICE"]`` is
:class:`Unavailable`, a NaN that says why and what would bring it, so loops
that print ``.eval`` keep working. An empty caption scores 0 on every metric.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import importlib.util
import json
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from capsim.cache import use_compilation_cache
from capsim.data.captions import read_json_file
from capsim.errors import CapsimError, CaptionError, DataFormatError
from capsim.eval.ngram import Bleu, CiderD, Rouge
from capsim.eval.ptb import ptb_tokenize

BLEU_KEYS = ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4")
CORENLP_JAR = "stanford-corenlp-3.6.0.jar"
SPICE_HINT = (
    "pycocoevalcap's Java SPICE with Stanford CoreNLP 3.6.0 installed beside it "
    "(python -c 'from pycocoevalcap.spice.get_stanford_models import get_stanford_models; "
    "get_stanford_models()', about 1 GB, and Java 8-11)"
)


class Unavailable(float):
    """A metric that could not run: NaN as a number, so tables and loops over ``.eval``
    keep working, with the reason in ``.reason`` and in its text."""

    reason: str

    def __new__(cls, reason: str) -> Unavailable:
        value = super().__new__(cls, "nan")
        value.reason = reason
        return value

    def __repr__(self) -> str:
        return f"Unavailable({self.reason!r})"

    __str__ = __repr__


def spice_unavailable_reason() -> str | None:
    """None when pycocoevalcap's SPICE can run here, else why not and what would bring it."""
    spec = importlib.util.find_spec("pycocoevalcap")
    if spec is None or spec.origin is None:
        return f"SPICE not computed: needs {SPICE_HINT}; pycocoevalcap is not installed"
    if shutil.which("java") is None:
        return f"SPICE not computed: needs {SPICE_HINT}; 'java' is not on PATH"
    if not (Path(spec.origin).parent / "spice" / "lib" / CORENLP_JAR).is_file():
        return f"SPICE not computed: needs {SPICE_HINT}; Stanford CoreNLP is not installed"
    return None


def _i2ce_scorer() -> Callable:
    from i2ce_jax.scorer import I2CEScorer  # the one place capsim reaches up to a paper

    return I2CEScorer.pretrained().compute_score


def _meteor_scorer() -> Callable:
    from capsim.eval.meteor import Meteor

    return Meteor().compute_score


def _spice_scorer() -> Callable:
    from pycocoevalcap.spice.spice import Spice

    return Spice().compute_score


class COCOEvalCap:
    """pycocoevalcap's evaluator: built from ``pycocotools`` ``COCO`` objects (or anything
    with ``getImgIds()`` and ``imgToAnns``), scored on ``params["image_id"]``."""

    def __init__(self, coco: Any, cocoRes: Any):
        self.evalImgs: list[dict] = []
        self.eval: dict[str, float] = {}
        self.imgToEval: dict[Any, dict] = {}
        self.coco = coco
        self.cocoRes = cocoRes
        self.params = {"image_id": coco.getImgIds()}
        self.empty_candidates: list = []  # images whose result is empty after tokenising

    def _captions(self) -> tuple[dict, dict]:
        gts, res = {}, {}
        for image_id in self.params["image_id"]:
            references = [a["caption"] for a in self.coco.imgToAnns[image_id]]
            results = [a["caption"] for a in self.cocoRes.imgToAnns[image_id]]
            if not references:
                raise CaptionError(image_id, "image has no reference caption in the annotations")
            if len(results) != 1:
                raise CaptionError(
                    image_id,
                    f"expected one result caption, found {len(results)} (score only the images "
                    "you have results for: params['image_id'] = cocoRes.getImgIds())",
                )
            gts[image_id], res[image_id] = references, results
        return gts, res

    def evaluate(self, verbose: bool = True) -> None:
        """Fills ``.eval`` (corpus scores), ``.imgToEval`` and ``.evalImgs``, as pycocoevalcap."""
        raw_gts, raw_res = self._captions()
        gts, res = ptb_tokenize(raw_gts), ptb_tokenize(raw_res)
        self.empty_candidates = [image for image, (caption,) in res.items() if not caption]
        if verbose and self.empty_candidates:
            print(f"{len(self.empty_candidates)} empty captions score 0: {self.empty_candidates}")
        spice_reason = spice_unavailable_reason()
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as background:
            # I2CE's encoder runs outside the GIL: started first, it overlaps the Python metrics.
            i2ce = background.submit(_i2ce_scorer(), raw_gts, raw_res)  # it reads raw text
            metrics = [  # (a call giving (score, per-image scores), or None; its keys)
                (functools.partial(Bleu(4).compute_score, gts, res), BLEU_KEYS),
                (functools.partial(_meteor_scorer(), gts, res), ("METEOR",)),
                (functools.partial(Rouge().compute_score, gts, res), ("ROUGE_L",)),
                (functools.partial(CiderD().compute_score, gts, res), ("CIDEr",)),
                (
                    None if spice_reason else functools.partial(_spice_scorer(), gts, res),
                    ("SPICE",),
                ),
                (i2ce.result, ("I2CE",)),
            ]
            for compute, methods in metrics:
                if compute is None:
                    self.setEval(Unavailable(spice_reason), methods[0])
                    if verbose:
                        print(spice_reason)
                    continue
                score, scores = compute()
                if len(methods) == 1:
                    score, scores = [score], [scores]
                for method, value, per_image in zip(methods, score, scores, strict=True):
                    self.setEval(float(value), method)
                    self.setImgToEvalImgs(per_image, list(gts), method)
                    if verbose:
                        print(f"{method}: {float(value):0.3f}")
        self.setEvalImgs()

    def setEval(self, score: float, method: str) -> None:
        self.eval[method] = score

    def setImgToEvalImgs(self, scores, imgIds, method: str) -> None:
        for image_id, score in zip(imgIds, scores, strict=True):
            self.imgToEval.setdefault(image_id, {"image_id": image_id})[method] = float(score)

    def setEvalImgs(self) -> None:
        self.evalImgs = list(self.imgToEval.values())


class CaptionFile:
    """The part of ``pycocotools.coco.COCO`` the evaluator reads, from a COCO annotations
    file or a results list, without pycocotools."""

    def __init__(self, annotations: list[dict], image_ids: Sequence[Any] | None = None):
        self.imgToAnns: dict[Any, list[dict]] = {i: [] for i in image_ids or ()}
        for annotation in annotations:
            self.imgToAnns.setdefault(annotation["image_id"], []).append(annotation)

    def getImgIds(self) -> list:
        return list(self.imgToAnns)


def _entries(path: Path, payload: Any, key: str | None) -> list[dict]:
    entries = payload.get(key) if key and isinstance(payload, dict) else payload
    if not isinstance(entries, list):
        want = f"a JSON object with an {key!r} list" if key else "a JSON list"
        raise DataFormatError(path, f"expected {want}")
    for index, entry in enumerate(entries):
        if not (isinstance(entry, dict) and "image_id" in entry and "caption" in entry):
            raise DataFormatError(path, f"entry {index} lacks image_id/caption: {entry!r:.120}")
        if not isinstance(entry["caption"], str):
            raise DataFormatError(path, f"entry {index}: caption must be a string")
    return entries


def load_files(annotations: str | Path, results: str | Path) -> tuple[CaptionFile, CaptionFile]:
    """The annotations and results files; a result naming an image that has no
    annotation is refused, naming the image (pycocotools only asserts)."""
    annotations, results = Path(annotations), Path(results)
    payload = read_json_file(annotations)
    images = (
        [image["id"] for image in payload.get("images", [])] if isinstance(payload, dict) else []
    )
    coco = CaptionFile(_entries(annotations, payload, "annotations"), images)
    result_entries = _entries(results, read_json_file(results), None)
    for index, entry in enumerate(result_entries):
        if not coco.imgToAnns.get(entry["image_id"]):
            raise DataFormatError(
                results,
                f"entry {index} names image {entry['image_id']!r}, which has no caption in "
                f"{annotations}",
            )
    return coco, CaptionFile(result_entries)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotations", required=True, help="COCO captions JSON (references)")
    parser.add_argument("--results", required=True, help="results JSON: [{image_id, caption}]")
    parser.add_argument("--out", help="JSON to write (default: <results>.scores.json)")
    args = parser.parse_args(argv)
    try:
        coco, results = load_files(args.annotations, args.results)
        evaluator = COCOEvalCap(coco, results)
        evaluator.params["image_id"] = results.getImgIds()
        evaluator.evaluate(verbose=False)
    except (CapsimError, FileNotFoundError) as error:
        print(f"capsim.eval.cocoeval: error: {error}", file=sys.stderr)
        return 1
    print("| metric | score |\n|---|---|")
    for name, value in evaluator.eval.items():
        shown = "n/a" if isinstance(value, Unavailable) else f"{value:.4f}"
        print(f"| {name} | {shown} |")
    skipped = {n: v.reason for n, v in evaluator.eval.items() if isinstance(v, Unavailable)}
    for reason in skipped.values():
        print(reason)
    if evaluator.empty_candidates:
        shown = ", ".join(map(str, evaluator.empty_candidates))
        print(f"{len(evaluator.empty_candidates)} empty captions scored 0 (images {shown})")
    out = Path(args.out or f"{args.results}.scores.json")
    computed = {n: v for n, v in evaluator.eval.items() if n not in skipped}
    report = {
        "eval": computed,
        "skipped": skipped,
        "empty_candidates": evaluator.empty_candidates,
        "imgToEval": evaluator.evalImgs,
    }
    out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    use_compilation_cache()  # the I2CE column's batch shapes compile once per machine
    sys.exit(main())
