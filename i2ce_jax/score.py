"""Score captions from the command line with I2CE (the packaged model by default).

    python -m i2ce_jax.score --refs refs.json --cands cands.json [--out scores.json]
        [--model base|large|research | --checkpoint WORKDIR] [--pooling top-3]
        [--sentences auto|whole|sentences] [--aggregation mean] [--weighting none] [--beta 1]
        [--scorer 2|1]

``refs.json``: ``{"<image id>": ["reference", ...], ...}``.
``cands.json``: COCO results style, ``[{"image_id": <id>, "caption": "..."}, ...]``.
Writes ``{"method", "version", "scorer", "model", "pooling", "corpus_score", "empty_candidates",
"empty_candidate_indices", "scores": [{"image_id", "caption", "score",
"reference_similarities", "way"}]}`` (``version`` names what to cite, e.g. "I2CE base,
scorer 2"; ``--scorer 1`` gives the scores before word evidence, bit for bit; ``way``: "whole" or "sentences", see
docs/long_captions.md; by sentences, ``reference_similarities`` are each reference's F
and ``reference_precision``/``reference_recall`` its parts). Every candidate gets a score (an empty one 0.0,
counted in ``empty_candidates``); malformed files, an image without references
and non-string captions are errors naming the file and entry, and the output
file is replaced atomically, so an error never leaves a half-written file.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

from capsim.cli import run_command
from capsim.data.captions import read_candidates_json, read_references_json, write_json_atomically
from capsim.errors import CaptionError
from i2ce_jax import pretrained
from i2ce_jax.scorer import DEFAULT_SCORER, SENTENCE_MODES, WEIGHTINGS, WORD_EVIDENCE, I2CEScorer


def score_files(
    scorer: I2CEScorer, refs: dict[str, list[str]], cands: list[tuple[str, str]]
) -> dict[str, Any]:
    """Scores every candidate (several per image allowed) against its image's references."""
    keys = [f"{index}:{image_id}" for index, (image_id, _) in enumerate(cands)]
    gts, res = {}, {}
    for key, (image_id, caption) in zip(keys, cands, strict=True):
        if image_id not in refs:
            raise CaptionError(key, f"image {image_id!r} has no references in --refs")
        gts[key], res[key] = refs[image_id], [caption]
    result = scorer.score(gts, res)
    rows = []
    for i, ((image_id, caption), score, row, mask, way) in enumerate(
        zip(cands, result.scores, result.similarities, result.mask, result.ways, strict=True)
    ):
        entry = {
            "image_id": image_id,
            "caption": caption,
            "score": float(score),
            "reference_similarities": [float(s) for s in row[mask]],
            "way": way,
        }
        if way == "sentences" and not np.isnan(result.precision[i][mask]).all():
            entry["reference_precision"] = [float(s) for s in result.precision[i][mask]]
            entry["reference_recall"] = [float(s) for s in result.recall[i][mask]]
        rows.append(entry)
    empty = [keys.index(k) for k in result.empty_candidates]
    return {
        "method": "I2CE",
        "version": scorer.version,
        "scorer": scorer.scorer,
        "pooling": scorer.pooling,
        "sentences": scorer.sentences,
        "by_sentences": sum(way == "sentences" for way in result.ways),
        "corpus_score": result.corpus_score,
        "empty_candidates": len(empty),
        "empty_candidate_indices": empty,
        "scores": rows,
    }


def add_sentence_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of the scorer's version and of scoring by sentences, shared by the commands."""
    parser.add_argument(
        "--scorer",
        type=int,
        default=DEFAULT_SCORER,
        choices=sorted(WORD_EVIDENCE),
        help="2: sentence vectors with word-level evidence (the default); 1: the scorer "
        "before it, bit for bit, to reproduce published numbers",
    )
    parser.add_argument(
        "--sentences",
        default="auto",
        choices=SENTENCE_MODES,
        help="auto: a caption of several sentences (or with such references) is aligned "
        "sentence by sentence, one sentence scores as before; whole/sentences force a way",
    )
    parser.add_argument(
        "--aggregation", default=None, help="over sentences: mean, min or softmin-T"
    )
    parser.add_argument("--weighting", default=None, choices=WEIGHTINGS)
    parser.add_argument("--beta", type=float, default=None, help="F-beta of the alignment")


def sentence_options(args: argparse.Namespace) -> dict[str, Any]:
    """``I2CEScorer`` keyword arguments of ``add_sentence_arguments``' flags."""
    options: dict[str, Any] = {"sentences": args.sentences, "scorer": args.scorer}
    for name in ("aggregation", "weighting", "beta"):
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    return options


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--refs", required=True)
    parser.add_argument("--cands", required=True)
    parser.add_argument("--out", default="-", help="output JSON file, or - for stdout")
    parser.add_argument(
        "--model",
        default=pretrained.DEFAULT,
        choices=pretrained.NAMES,
        help="packaged model (research: non-commercial terms, see its MODEL_CARD.md)",
    )
    parser.add_argument(
        "--checkpoint", default=None, help="an I2CE training workdir instead of a packaged model"
    )
    parser.add_argument(
        "--pooling", default=None, help="top-1..top-5, mean or max (default: the model's)"
    )
    add_sentence_arguments(parser)
    args = parser.parse_args(argv)
    refs, cands = (
        read_references_json(args.refs),
        read_candidates_json(args.cands),
    )  # bad files fail before loading
    kwargs = {"pooling": args.pooling} if args.pooling else {}
    kwargs.update(sentence_options(args))
    if args.checkpoint:
        scorer = I2CEScorer.from_checkpoint(args.checkpoint, **kwargs)
    else:
        if args.model in pretrained.RESEARCH_ONLY:
            print(
                f"note: --model {args.model}: {pretrained.RESEARCH_ONLY[args.model]}",
                file=sys.stderr,
            )
        scorer = I2CEScorer.pretrained(args.model, **kwargs)
    result = {"model": args.checkpoint or args.model, **score_files(scorer, refs, cands)}
    if args.out == "-":
        json.dump(result, sys.stdout, indent=1)
        print()
    else:
        write_json_atomically(args.out, result)
        print(
            f"scored {len(result['scores'])} captions ({result['empty_candidates']} empty), "
            f"mean {result['corpus_score']:.4f} -> {args.out}",
            file=sys.stderr,
        )
    return 0


def cli() -> None:
    run_command(main, "i2ce_jax.score")


if __name__ == "__main__":
    cli()
