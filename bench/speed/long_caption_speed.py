"""I2CE's speed on 200-word paragraphs, by sentences against one vector, beside the
COCOEvalCap drop-in's BLEU and CIDEr on the same paragraphs (issue 60).

    python bench/speed/long_caption_speed.py [--paragraphs 500] [--words 200]
        [--references 1] [--rounds 5] [--write]

Paragraphs join COCO val2017 captions, each closed by a full stop
(capsim.eval.long_caption_pairs.paragraph), until ``--words`` words: the candidate of
paragraph k takes one caption of each image of a run, its ``--references`` references
the next ones; a second pass over the images takes their later captions, so no sentence
is scored twice. Timed as users run them, from raw captions:

- ``I2CE by sentences``: ``I2CEScorer.pretrained().compute_score`` (``sentences="auto"``:
  every paragraph is split and aligned; scorer 2, word evidence in every sentence pair);
- ``I2CE by sentences, scorer 1``: the same without word evidence (before issue 69);
- ``I2CE whole``: the default scorer with ``sentences="whole"`` (one vector a paragraph);
- ``BLEU + CIDEr``: the drop-in's (capsim.metrics.cocoeval) tokenizer, BLEU-4 and CIDEr-D.

Each runs once off the clock (compilation), then ``--rounds`` rounds alternate them
(who goes first turns each round). Before each timed run the text memos of both sides
(the tokenizer's lines and sentence ends, I2CE's token ids and word stems) are emptied
off the clock, so
each round scores the paragraphs as new text. Captions/s is the median with min and max; the ratios
are per round. Prints a table; ``--write`` records it in bench/results and bench/RESULTS.md
("I2CE on long captions: speed").
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse
import json
import statistics

from bench.harness import SHARED_DATA, load_average, ratio_summary, record_results, time_rounds
from capsim import text
from capsim.eval.long_caption_pairs import paragraph
from capsim.metrics import sentences, tokenizer, word_alignment
from capsim.metrics.bleu import Bleu
from capsim.metrics.cider import CiderD
from capsim.metrics.tokenizer import ptb_tokenize
from capsim.tables import format_cells
from i2ce_jax.scorer import WHOLE, I2CEScorer

SECTION = "## I2CE on long captions"
CAPTIONS = 5  # every COCO val2017 image has at least five


def paragraphs(count: int, words: int, references: int) -> tuple[dict, dict]:
    """``count`` candidate paragraphs of about ``words`` words, with their references."""
    payload = json.loads((SHARED_DATA / "coco" / "captions_val2017.json").read_text())
    by_image: dict[int, list[str]] = {}
    for row in payload["annotations"]:
        by_image.setdefault(row["image_id"], []).append(row["caption"])
    slots = references + 1
    images = [c for _, c in sorted(by_image.items()) if len(c) >= CAPTIONS]
    gts, res, at = {}, {}, 0
    for k in range(count):
        group: list[list[str]] = []
        while sum(len(c[0].split()) for c in group) < words:
            # Each pass over the images takes the next captions, so no sentence repeats
            # (a repeated one would be encoded once and flatter I2CE).
            first = (at // len(images)) * slots
            if first + slots > CAPTIONS:
                raise ValueError(f"{count} paragraphs of {words} words would repeat captions")
            group.append(images[at % len(images)][first : first + slots])
            at += 1
        res[k] = [paragraph([c[0] for c in group])]
        gts[k] = [paragraph([c[r + 1] for c in group]) for r in range(references)]
    return gts, res


def drop_in_bleu_cider(gts: dict, res: dict) -> None:
    """BLEU-4 and CIDEr-D of raw captions, as COCOEvalCap.evaluate() runs them."""
    tokens_gts, tokens_res = ptb_tokenize(gts), ptb_tokenize(res)
    Bleu(4).compute_score(tokens_gts, tokens_res)
    CiderD().compute_score(tokens_gts, tokens_res)


def forget_text(scorers: list[I2CEScorer]) -> None:
    """Empties the process's text memos, so that a round meets the paragraphs as new."""
    tokenizer._line_tokens.cache_clear()
    sentences._ends_sentence.cache_clear()
    text._tokens.cache_clear()
    word_alignment.stem.cache_clear()
    for scorer in scorers:
        scorer.vocab._sentences.clear()


def measure(count: int, words: int, references: int, rounds: int) -> dict:
    gts, res = paragraphs(count, words, references)
    by_sentences, whole = I2CEScorer.pretrained(), I2CEScorer.pretrained(sentences=WHOLE)
    first = I2CEScorer.pretrained(scorer=1)
    runners = {
        "I2CE by sentences": lambda _: by_sentences.compute_score(gts, res),
        "I2CE by sentences, scorer 1": lambda _: first.compute_score(gts, res),
        "I2CE whole": lambda _: whole.compute_score(gts, res),
        "BLEU + CIDEr (drop-in)": lambda _: drop_in_bleu_cider(gts, res),
    }
    ways = by_sentences.score(gts, res).ways
    for run in runners.values():  # compiled and cached off the clock
        run(0)
    load_before = load_average()
    scorers = [by_sentences, first, whole]
    seconds = time_rounds(runners, rounds, before=lambda _: forget_text(scorers))
    load_after = load_average()
    words_per = [len(c[0].split()) for c in res.values()]
    return {
        "paragraphs": count,
        "words_mean": statistics.mean(words_per),
        "references": references,
        "by_sentences": sum(w == "sentences" for w in ways),
        "rounds": rounds,
        "seconds": seconds,
        "load": [load_before, load_after],
        "ratios": {
            name: ratio_summary(seconds[name], seconds["BLEU + CIDEr (drop-in)"])
            for name in ("I2CE by sentences", "I2CE by sentences, scorer 1", "I2CE whole")
        }
        | {
            "by sentences / whole": ratio_summary(
                seconds["I2CE by sentences"], seconds["I2CE whole"]
            )
        },
    }


def table(row: dict) -> str:
    header = ["scorer", "captions/s, median [min, max]", "× BLEU + CIDEr, median [min, max]"]
    cells = []
    for name, seconds in row["seconds"].items():
        rates = sorted(row["paragraphs"] / s for s in seconds)
        ratio = row["ratios"].get(name)
        cells.append(
            [
                name,
                f"{statistics.median(rates):.0f} [{rates[0]:.0f}, {rates[-1]:.0f}]",
                f"{ratio['ratio_median']:.2f} [{ratio['ratio_min']:.2f}, {ratio['ratio_max']:.2f}]"
                if ratio
                else "1",
            ]
        )
    both = row["ratios"]["by sentences / whole"]
    return (
        f"{row['paragraphs']} paragraphs of {row['words_mean']:.0f} words on average, "
        f"{row['references']} reference(s) each, {row['by_sentences']} scored by sentences; "
        f"{row['rounds']} alternating rounds; load average {row['load'][0]:.2f} before, "
        f"{row['load'][1]:.2f} after.\n\n"
        + format_cells(header, cells)
        + f"\n\nBy sentences against whole, per round: {both['ratio_median']:.2f}× the speed "
        f"[{both['ratio_min']:.2f}, {both['ratio_max']:.2f}]."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--paragraphs", type=int, default=500)
    parser.add_argument("--words", type=int, default=200)
    parser.add_argument("--references", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    row = measure(args.paragraphs, args.words, args.references, args.rounds)
    text = table(row)
    print(text)
    if args.write:
        record_results("long_caption_speed", row, SECTION, text, "speed")


if __name__ == "__main__":
    main()
