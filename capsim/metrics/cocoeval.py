"""pycocoevalcap's ``COCOEvalCap`` as a drop-in, in Python, open to extra raw-text scorers.

    from capsim.metrics.cocoeval import COCOEvalCap   # was: from pycocoevalcap.eval import ...
    evaluator = COCOEvalCap(coco, coco.loadRes("results.json"))
    evaluator.params["image_id"] = evaluator.cocoRes.getImgIds()
    evaluator.evaluate()            # .eval, .imgToEval, .evalImgs as pycocoevalcap fills them

    python -m capsim.metrics.cocoeval --annotations captions.json --results results.json [--out F]
        [--cider_idf captions_val2014.json]   # CIDEr's IDF from a corpus (capsim.metrics.cider_idf)
    python -m capsim.metrics.cocoeval --annotations A.json --results sysA.json
        --results sysB.json --bootstrap 1000 --seed 0   # intervals; p-values against sysA

``evaluator.bootstrap(...)`` does the same from Python (capsim.metrics.bootstrap says how).
The PTB tokenisation comes from capsim.metrics.tokenizer (the jar's tokens on every caption
of the differential tests), BLEU-1..4, ROUGE-L and CIDEr-D from capsim.metrics.bleu, .rouge and .cider
and METEOR 1.5 from capsim.metrics.meteor (the jar's score on every caption of the
differential tests); no Java is needed. ``scorers`` adds metrics that read the raw
captions (pycocoevalcap's ``compute_score`` contract), each computed in a thread
beside the others: i2ce_jax.cocoeval passes the packaged I2CE model this way, and
``python -m i2ce_jax.cocoeval`` is this command with the I2CE column. SPICE runs
through pycocoevalcap's Java SPICE when Stanford CoreNLP is installed beside it;
otherwise ``.eval["SPICE"]`` is :class:`Unavailable`, a NaN that says why and what
would bring it, so loops that print ``.eval`` keep working. An empty caption scores 0
on every metric.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import json
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from capsim.errors import CapsimError, CaptionError, DataFormatError
from capsim.metrics import bootstrap
from capsim.metrics.caption_files import load_files
from capsim.metrics.cider_idf import CorpusIdf, corpus_idf
from capsim.metrics.coco_metrics import builtin_metric_rows
from capsim.metrics.tokenizer import ptb_tokenize

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
    """None when pycocoevalcap's SPICE can run here, else why not and what would bring it.
    pycocoevalcap 1.2 is a namespace package (no ``__init__``): its SPICE is found through
    ``pycocoevalcap.spice``, whose folder holds the jar and, once fetched, CoreNLP."""
    try:
        spec = importlib.util.find_spec("pycocoevalcap.spice")
    except ModuleNotFoundError:  # no pycocoevalcap at all
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return f"SPICE not computed: needs {SPICE_HINT}; pycocoevalcap is not installed"
    if shutil.which("java") is None:
        return f"SPICE not computed: needs {SPICE_HINT}; 'java' is not on PATH"
    folder = Path(next(iter(spec.submodule_search_locations)))
    if not (folder / "lib" / CORENLP_JAR).is_file():
        return f"SPICE not computed: needs {SPICE_HINT}; Stanford CoreNLP is not installed"
    return None


def _spice_scores(gts: dict, res: dict) -> list[float]:
    """pycocoevalcap's SPICE F-score per image (its own per-image value is a dict)."""
    from pycocoevalcap.spice.spice import Spice

    _, scores = Spice().compute_score(gts, res)
    return [s["All"]["f"] if isinstance(s, dict) else s for s in scores]


RawScorer = Callable[[dict, dict], tuple[float, Sequence[float]]]


def _mean_of(name: str, future: concurrent.futures.Future) -> bootstrap.MetricRows:
    """A raw-text scorer's per-image scores, once its thread is done."""
    return bootstrap.mean_rows(name, future.result()[1])


class COCOEvalCap:
    """pycocoevalcap's evaluator: built from ``pycocotools`` ``COCO`` objects (or anything
    with ``getImgIds()`` and ``imgToAnns``), scored on ``params["image_id"]``.

    Args:
        coco: the references, e.g. ``COCO("captions_val2014.json")`` of pycocotools
            (or ``caption_files.load_files``, without pycocotools).
        cocoRes: the results, one caption an image: ``coco.loadRes("results.json")``.
        scorers: more metrics, name -> ``compute_score(gts, res)`` on the raw captions
            (pycocoevalcap's contract); each becomes a column of ``.eval``.
        cider_idf: CIDEr's document frequencies from a reference corpus (a COCO
            annotations file or a JSON of image id -> references, or a loaded
            ``CorpusIdf``) instead of the scored references (``capsim.metrics.cider_idf``).

    The module's docstring shows the calls, as pycocoevalcap's users make them.
    """

    def __init__(
        self,
        coco: Any,
        cocoRes: Any,
        scorers: Mapping[str, RawScorer] | None = None,
        cider_idf: str | Path | CorpusIdf | None = None,
    ):
        self.evalImgs: list[dict] = []
        self.eval: dict[str, float] = {}
        self.imgToEval: dict[Any, dict] = {}
        self.coco = coco
        self.cocoRes = cocoRes
        self.scorers = dict(scorers or {})  # name -> compute_score(gts, res) on raw captions
        self.params = {"image_id": coco.getImgIds()}
        # CIDEr's document frequencies: the scored references (pycocoevalcap) or a corpus's
        self.cider_idf = corpus_idf(cider_idf) if isinstance(cider_idf, str | Path) else cider_idf
        self.empty_candidates: list = []  # images whose result is empty after tokenising
        self.metric_rows: list[bootstrap.MetricRows] = []  # per-image rows, for bootstrap()

    def _captions(self) -> tuple[dict, dict]:
        gts, res = {}, {}
        for image_id in self.params["image_id"]:
            references = [a["caption"] for a in self.coco.imgToAnns[image_id]]
            results = [a["caption"] for a in self.cocoRes.imgToAnns.get(image_id, [])]
            if not references:
                raise CaptionError(image_id, "image has no reference caption in the annotations")
            if not results:
                raise CaptionError(
                    image_id,
                    "has no result caption (score only the images you have results for: "
                    "params['image_id'] = cocoRes.getImgIds())",
                )
            if len(results) > 1:
                raise CaptionError(
                    image_id, f"has {len(results)} result captions: each image takes one result"
                )
            gts[image_id], res[image_id] = references, results
        return gts, res

    def evaluate(self, verbose: bool = True) -> None:
        """Fills ``.eval`` (corpus scores), ``.imgToEval`` and ``.evalImgs``, as pycocoevalcap.

        Keys: ``Bleu_1`` .. ``Bleu_4``, ``METEOR``, ``ROUGE_L``, ``CIDEr``, ``SPICE`` (an
        :class:`Unavailable` NaN naming why, unless pycocoevalcap's Java SPICE can run)
        and one per extra scorer. An empty result caption scores 0 and is listed in
        ``.empty_candidates``.

        Args:
            verbose: print each corpus score, and the empty captions, as pycocoevalcap.

        Raises:
            capsim.errors.CaptionError: an image of ``params["image_id"]`` has no reference,
                no result, or more than one result (the error names the image).
        """
        raw_gts, raw_res = self._captions()
        gts, res = ptb_tokenize(raw_gts), ptb_tokenize(raw_res)
        self.empty_candidates = [image for image, (caption,) in res.items() if not caption]
        if verbose and self.empty_candidates:
            print(f"{len(self.empty_candidates)} empty captions score 0: {self.empty_candidates}")
        spice_reason = spice_unavailable_reason()
        self.metric_rows = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as background:
            # Started first: an encoder (I2CE's) and METEOR's compiled core run outside the
            # GIL, in threads beside the Python metrics.
            extra = {n: background.submit(f, raw_gts, raw_res) for n, f in self.scorers.items()}
            bleu, meteor, rouge, cider = builtin_metric_rows(gts, res, cider_idf=self.cider_idf)
            spice = None if spice_reason else bootstrap.mean_rows("SPICE", _spice_scores(gts, res))
            extra_rows = [_mean_of(name, future) for name, future in extra.items()]
            # Each metric's per-image rows, in pycocoevalcap's order (None: SPICE unavailable).
            for rows in (bleu, meteor, rouge, cider, spice, *extra_rows):
                if rows is None:
                    self.setEval(Unavailable(spice_reason), "SPICE")
                    if verbose:
                        print(spice_reason)
                    continue
                self.metric_rows.append(rows)
                count = rows.rows.shape[0]
                corpus = rows.score(rows.rows.sum(axis=0, keepdims=True), count)[0]
                per_image = rows.score(rows.rows, 1)
                for k, method in enumerate(rows.keys):
                    self.setEval(float(corpus[k]), method)
                    self.setImgToEvalImgs(per_image[:, k], list(gts), method)
                    if verbose:
                        print(f"{method}: {float(corpus[k]):0.3f}")
        self.setEvalImgs()

    def setEval(self, score: float, method: str) -> None:
        """pycocoevalcap's: ``.eval[method] = score``."""
        self.eval[method] = score

    def setImgToEvalImgs(self, scores, imgIds, method: str) -> None:
        """pycocoevalcap's: each image's score of ``method`` into ``.imgToEval``."""
        for image_id, score in zip(imgIds, scores, strict=True):
            self.imgToEval.setdefault(image_id, {"image_id": image_id})[method] = float(score)

    def setEvalImgs(self) -> None:
        """pycocoevalcap's: ``.evalImgs``, the list of ``.imgToEval``'s entries."""
        self.evalImgs = list(self.imgToEval.values())

    def bootstrap(
        self,
        resamples: int = 1000,
        seed: int = 0,
        confidence: float = 0.95,
        others: Mapping[str, COCOEvalCap] | None = None,
        name: str = "system",
    ) -> dict:
        """Each metric's score with its bootstrap interval over images and, for each of
        ``others`` (evaluated on the same images), the difference to this system with a
        paired bootstrap and an approximate-randomization p-value; see capsim.metrics.bootstrap.
        Call evaluate() on every evaluator first.

        Args:
            resamples, seed, confidence: as :func:`capsim.metrics.bootstrap.bootstrap`.
            others: other systems' evaluators, by name, scored on the same images.
            name: this system's name in the report.

        Returns:
            The report of :func:`capsim.metrics.bootstrap.bootstrap`.

        Raises:
            ValueError: an evaluator was not evaluated, or was scored on other images.
        """
        systems = {name: self, **(others or {})}
        for other_name, evaluator in systems.items():
            if not evaluator.metric_rows:
                raise ValueError(f"{other_name}: call evaluate() before bootstrap()")
            if list(evaluator.imgToEval) != list(self.imgToEval):
                raise ValueError(
                    f"{other_name} was scored on other images than {name}: paired tests "
                    "need the same images (set params['image_id'] alike)"
                )
        rows = {n: e.metric_rows for n, e in systems.items()}
        return bootstrap.bootstrap(rows, resamples=resamples, seed=seed, confidence=confidence)


def _system_names(paths: Sequence[str]) -> list[str]:
    """Each results file's stem, or its path where two stems are alike."""
    stems = [Path(path).stem for path in paths]
    return stems if len(set(stems)) == len(stems) else list(paths)


def evaluate_systems(
    annotations: str | Path,
    results: Sequence[str | Path],
    scorers: Mapping[str, RawScorer] | None = None,
    cider_idf: str | Path | None = None,
) -> list[COCOEvalCap]:
    """Each results file scored against the annotations, all on the first file's images
    (so that they can be compared pairwise). Every file is read and checked before any is
    scored: one that lacks an image of the first is refused, naming both.

    Args:
        annotations: the COCO captions JSON of the references.
        results: COCO results JSON files, ``[{"image_id": ..., "caption": ...}]``.
        scorers: more metrics, as :class:`COCOEvalCap` takes them.
        cider_idf: CIDEr's document frequencies from a corpus file, as :class:`COCOEvalCap`.

    Returns:
        One evaluated :class:`COCOEvalCap` per results file, in order.

    Raises:
        capsim.errors.DataFormatError: a file is malformed or lacks an image of the first.
    """
    systems = [load_files(annotations, path) for path in results]
    images = systems[0][1].getImgIds()
    for path, (_, result_file) in zip(results[1:], systems[1:], strict=True):
        missing = [i for i in images if not result_file.imgToAnns.get(i)]
        if missing:
            raise DataFormatError(
                path,
                f"has no result for image {missing[0]!r} ({len(missing)} of the {len(images)} "
                f"images that {results[0]} scores): systems are compared on the same images",
            )
    evaluators = []
    idf = corpus_idf(cider_idf) if cider_idf else None
    for coco, result_file in systems:
        evaluator = COCOEvalCap(coco, result_file, scorers, idf)
        evaluator.params["image_id"] = images
        evaluator.evaluate(verbose=False)
        evaluators.append(evaluator)
    return evaluators


def _write_scores(evaluator: COCOEvalCap, out: Path) -> None:
    """The table on screen and the JSON report of one system."""
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
    computed = {n: v for n, v in evaluator.eval.items() if n not in skipped}
    report = {
        "eval": computed,
        "skipped": skipped,
        "empty_candidates": evaluator.empty_candidates,
        "imgToEval": evaluator.evalImgs,
    }
    out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(f"wrote {out}")


def main(argv: Sequence[str] | None = None, scorers: Mapping[str, RawScorer] | None = None) -> int:
    """The command ``python -m capsim.metrics.cocoeval``; ``scorers`` as COCOEvalCap's
    (i2ce_jax.cocoeval passes I2CE).

    ``argv``: the arguments (``sys.argv[1:]`` when None; ``--help`` lists them). Returns
    the exit status: 0, or 1 after one line naming bad input.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotations", required=True, help="COCO captions JSON (references)")
    parser.add_argument(
        "--results",
        required=True,
        action="append",
        help="results JSON: [{image_id, caption}]; repeat to compare systems on the first "
        "one's images (the first is the baseline)",
    )
    parser.add_argument(
        "--bootstrap",
        type=int,
        default=0,
        metavar="N",
        help="N resamples of the images: 95%% intervals, and paired p-values against the "
        "first system",
    )
    parser.add_argument(
        "--cider_idf",
        metavar="FILE",
        help="CIDEr's document frequencies from this reference corpus (COCO annotations or "
        "image -> references JSON), as the original CIDEr code's coco-val-df, instead of "
        "from the scored references (pycocoevalcap's default; 0 on one image)",
    )
    parser.add_argument("--seed", type=int, default=0, help="the resamples' seed")
    parser.add_argument("--confidence", type=float, default=0.95, help="interval coverage")
    parser.add_argument(
        "--out",
        help="JSON to write: one system's scores (default <results>.scores.json), or with "
        "--bootstrap the comparison (default <first results>.bootstrap.json)",
    )
    args = parser.parse_args(argv)
    names = _system_names(args.results)
    try:
        evaluators = dict(
            zip(
                names,
                evaluate_systems(args.annotations, args.results, scorers, args.cider_idf),
                strict=True,
            )
        )
        for (name, evaluator), results in zip(evaluators.items(), args.results, strict=True):
            if not args.bootstrap:
                if len(names) > 1:
                    print(f"\n{name}:")
                out = args.out if len(names) == 1 else None
                _write_scores(evaluator, Path(out or f"{results}.scores.json"))
        if args.bootstrap:
            baseline, *others = evaluators.items()
            report = baseline[1].bootstrap(
                args.bootstrap, args.seed, args.confidence, dict(others), name=baseline[0]
            )
    except (CapsimError, FileNotFoundError, ValueError) as error:
        print(f"capsim.metrics.cocoeval: error: {error}", file=sys.stderr)
        return 1
    if args.bootstrap:
        print(bootstrap.format_report(report))
        out = Path(args.out or f"{args.results[0]}.bootstrap.json")
        out.write_text(json.dumps(report, indent=1), encoding="utf-8")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
