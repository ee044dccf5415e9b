"""capsim's PTB tokenizer (capsim.metrics.tokenizer) against pycocoevalcap's Java PTBTokenizer.

    python bench/agreement/ptb_agreement.py [--generated 20000] [--show 20]
    python bench/agreement/ptb_agreement.py --probe-characters  # capsim/metrics/ptb_characters.txt

Every distinct caption or sentence of the shared data (Flickr8k, COCO val2017 and
the val2014 subset, the COCO caption lists, Flickr30k, CC3M, every STS sentence)
and ``--generated`` strings built from the awkward pieces below are tokenized by
both, each set as one pycocoevalcap call (its lines in sorted order), and
compared line by line. Prints a markdown table (lines, lines equal) and the
``--show`` first differing lines; with ``--write``, the table goes to
bench/RESULTS.md ("PTB tokenizer against the jar").

``--probe-characters`` asks the jar how it treats each of the 63,481 BMP
characters (inside a word, and alone) and writes the letters, digits and deleted
characters that capsim.metrics.tokenizer reads.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse
import json
import random
import re
import subprocess
import tempfile
import time
import unicodedata

from bench.harness import SHARED_DATA, load_average, update_section
from capsim.metrics import tokenizer as ptb
from capsim.tables import format_table

SECTION = "## PTB tokenizer against the jar"


def _words(text: str) -> list[str]:
    return text.split()


# Strings a caption may hold, by the classes the issue names; generated lines join 2-12.
PIECES = {
    "words": _words(
        "a dog The It man's dogs' don't can't cannot gonna it's O'Neill rock'n'roll 'n' '90s "
        "'15 y'all ma'am Dunkin' gov't 'til o'clock d'Angelo well-known x-ray a_b snake_case"
    ),
    "abbreviations": _words(
        "Ave. ave. Mr. mr. Dr. St. Inc. Co. Ltd. etc. vs. Vs. fig. Fig. no. No. art. U.S. "
        "u.s. U.K. e.g. i.e. a.m. p.m. Ph.D. A. I. c. x.y.z. Jan. Calif. cOS. MO.N Inc.Nx "
        "approx. dog. dog., dog.; dog.:"
    ),
    "slashes": _words(
        "his/her and/or 1/2 3/4 1/2/3 12hrs/day a/b/c/d Gödel/Turing 2012/13 01/02/2003 "
        "10-12-2012 22/32"
    ),
    "numbers": [
        *_words(
            "3.5 .5 1,000 1,000.50 -3 +4 6.9 5:30 5:30pm 10am 10:30am 2pm 7.10 6.0-magnitude "
            "1,700-square-mile 4.5-inch 12x12 2x4 3-4 1-2-3 1-1/2 555-1212 2009"
        ),
        *["1 1/2", "(816) 234-7743", "12 345 6789", "(55) 555 1212"],
    ],
    "currency": _words("$5 $5.99 US$5 A$ €5 £5 ¢ 5¢ 50% $$ a$$hole ¤ ¥10"),
    "quotes": [
        *_words("\" ' ` `` '' “ ” ‘ ’ « » ‹ › \x93 \x94 \x91 \x92 it’s BBC’s"),
        *['"quoted"', "'single'"],
    ],
    "brackets": [
        *_words("( ) [ ] { } (a) [b] {c} -LRB- -rrb- (-LRB- )-RRB- <b> </b> <br/> <EUR=>"),
        *["<a b>", '<a href="x">', "<!-- x -->"],
    ],
    "ellipses": _words(". .. ... .... ..... … a.. a.... x...y"),
    "dashes": _words("- -- --- ---- ----- ------ – — ― a–b a—b a--b a---b"),
    "web": _words(
        "http://a.com/b?c=d https://x.org www.google.com foo.com hvg.hu foo@bar.com #tag #p2 "
        "#didn't #a_b #café @user @a.b @_x c# C++ f# j#"
    ),
    "emoticons": _words(":) ;) :-( :D :P :p =) 8) B) <3 ^_^ xD :pa :)x tl;dr"),
    "non_ascii": [
        *_words("café naïve Zürich 日本語 Привет ΑΒΓ 😀 jövo˝ért train¹ Mar\xadn ˝ ˚ o̯reĝtos"),
        *_words("\uf0a7 ½ ¼ ⅓ ⅕ © \x01 \x7f"),
        *["\u00a0", "\u2009", "\u3000", "a\u00a0b"],
    ],
    "repeated": _words("!!! ??? ?!? !! ?? *** ## ### >> >>> << @@ __ == ~~ ,, ;; :: ++ %%"),
    "entities": _words("&amp; &lt; &gt; &quot; &apos; &nbsp; &#39; AT&T R&amp;D a&b"),
}
SENTENCE_STARTERS = ["The", "It", "A", "In", "However", "They", "Xy", "On", "the", "it"]
GLUES = [" "] * 8 + ["", "  ", "\t"]


def generated_lines(count: int, seed: int = 0) -> list[str]:
    """``count`` seeded lines mixing pieces of every class with plain words."""
    rng = random.Random(seed)
    classes = sorted(PIECES)
    lines = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(2, 12)):
            kind = rng.choice([*classes, "starter", "plain", "plain"])
            if kind == "starter":
                parts.append(rng.choice(SENTENCE_STARTERS))
            elif kind == "plain":
                parts.append(rng.choice(["a", "dog", "runs", "on", "the", "grass", "Man"]))
            else:
                parts.append(rng.choice(PIECES[kind]))
            parts.append(rng.choice(GLUES))
        lines.append("".join(parts).strip())
    return lines


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def real_sentences(data: Path = SHARED_DATA) -> dict[str, list[str]]:
    """Every distinct caption or sentence of each shared-data source (sorted); those with
    a line break other than "\\n", which pycocoevalcap's file cannot hold, are left out."""
    extra = data / "extra_captions"
    coco_json = lambda path: [row["caption"] for row in json.loads(path.read_text())["annotations"]]  # noqa: E731
    sources = {
        "Flickr8k": [line.split("\t", 1)[1] for line in _lines(data / "flickr8k" / "Flickr8k.token.txt")],
        "COCO val2017": coco_json(data / "coco" / "captions_val2017.json"),
        "COCO val2014 subset": coco_json(extra / "coco" / "captions_val2014_subset.json"),
        "COCO caption lists": [s for p in sorted((extra / "coco").glob("*.txt")) for s in _lines(p)],
        "Flickr30k": [s for p in sorted((extra / "flickr30k").glob("*.en")) for s in _lines(p)],
        "CC3M": [s.split("\t")[0] for p in sorted((extra / "cc3m").glob("*.tsv")) for s in _lines(p)],
        "STS": [
            sentence
            for path in sorted((data / "sts").rglob("*.tsv")) + sorted((data / "sts").rglob("STS.input*.txt"))
            for line in _lines(path)
            for sentence in (line.split("\t")[1:3] if path.suffix == ".tsv" else line.split("\t"))
        ],
    }  # fmt: skip
    return {
        name: sorted({s.replace("\n", " ") for s in texts if not ptb.LINE_BREAKS.search(s)})
        for name, texts in sources.items()
    }


def jar_tokenize(lines: list[str]) -> list[str]:
    """pycocoevalcap's PTBTokenizer (Java) on ``lines`` as one call."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    tokenized = PTBTokenizer().tokenize({n: [{"caption": s}] for n, s in enumerate(lines)})
    return [tokenized[n][0] for n in range(len(lines))]


def compare(name: str, lines: list[str]) -> dict:
    """Both tokenizers on one set: the share of equal lines and the differing ones."""
    jar = jar_tokenize(lines)
    started = time.perf_counter()
    ours = [" ".join(tokens) for tokens in ptb.tokenize_lines(lines)]
    seconds = time.perf_counter() - started
    differing = [(s, j, o) for s, j, o in zip(lines, jar, ours, strict=True) if j != o]
    return {"set": name, "lines": len(lines), "equal": len(lines) - len(differing),
            "python s": seconds, "differing": differing}  # fmt: skip


def probe_characters(out: Path) -> None:
    """Writes the jar's letters, digits and deleted characters (see the module docstring)."""
    from pycocoevalcap.tokenizer import ptbtokenizer

    jar = Path(ptbtokenizer.__file__).parent / ptbtokenizer.STANFORD_CORENLP_3_4_1_JAR
    breaks = "\n\r\u2028\u2029\x0b\x0c\x85"
    chars = [c for c in range(0x10000) if not 0xD800 <= c < 0xE000 and chr(c) not in breaks]

    def jar_lines(lines: list[str]) -> list[str]:
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt") as file:
            file.write("\n".join(lines) + "\n")
            file.flush()
            command = ["java", "-cp", str(jar), "edu.stanford.nlp.process.PTBTokenizer",
                       "-preserveLines", file.name]  # fmt: skip
            return (
                subprocess.run(command, capture_output=True, check=True).stdout.decode().split("\n")
            )

    inside = {
        c
        for c, o in zip(chars, jar_lines([f"ab{chr(c)}cd" for c in chars]), strict=False)
        if o == f"ab{chr(c)}cd"
    }
    alone = dict(
        zip(
            chars,
            (o[1:-1].strip() for o in jar_lines([f"x {chr(c)} y" for c in chars])),
            strict=False,
        )
    )
    handled = set(map(ord, " !-./?@_")) | {0x58A, 0x2010, 0x2011}  # joined by their own rules
    digits = {c for c in inside if re.fullmatch(r"\d", chr(c))}
    word = inside - handled - digits
    letters = {c for c in word if unicodedata.category(chr(c)).startswith("L")}
    classes = {
        "letters": letters,
        "marks": word - letters,
        "digits": digits,
        "deleted": {c for c, text in alone.items() if not text},
    }
    header = (
        "# Character classes of CoreNLP 3.4.1's PTBTokenizer, as ranges of code points (hex),\n"
        "# probed with the jar by bench/agreement/ptb_agreement.py --probe-characters.\n"
        "# Characters that keep 'abXcd' one token are [letters] (Unicode letters), [marks] (the\n"
        "# rest: accents, marks) and [digits]; [deleted] vanish from 'x X y' (untokenizable, or\n"
        "# white space).\n"
        "# Characters above U+FFFF reach the jar as surrogate pairs, which it deletes.\n"
    )
    body = [f"[{name}]\n" + _ranges(codes) for name, codes in classes.items()]
    out.write_text(header + "".join(body), encoding="utf-8")
    print(f"wrote {out}: " + ", ".join(f"{len(v)} {k}" for k, v in classes.items()))


def _ranges(codes: set[int]) -> str:
    spans: list[list[int]] = []
    for code in sorted(codes):
        if spans and spans[-1][1] == code - 1:
            spans[-1][1] = code
        else:
            spans.append([code, code])
    items = [f"{a:04x}" if a == b else f"{a:04x}-{b:04x}" for a, b in spans]
    return "".join(" ".join(items[i : i + 10]) + "\n" for i in range(0, len(items), 10))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--generated", type=int, default=20000, help="generated lines")
    parser.add_argument("--show", type=int, default=20, help="differing lines to print")
    parser.add_argument("--write", action="store_true", help="write the table to RESULTS.md")
    parser.add_argument("--probe-characters", action="store_true")
    args = parser.parse_args(argv)
    if args.probe_characters:
        probe_characters(Path(ptb.__file__).with_name("ptb_characters.txt"))
        return 0
    load_before = load_average()
    sets = {
        **real_sentences(),
        f"generated (seed 0, {args.generated})": generated_lines(args.generated),
    }
    rows = [compare(name, lines) for name, lines in sets.items()]
    table = format_table(
        [{"set": r["set"], "lines": r["lines"], "equal to the jar": r["equal"],
          "share": f"{r['equal'] / r['lines']:.4%}", "python s": f"{r['python s']:.1f}"}
         for r in rows],
        ["set", "lines", "equal to the jar", "share", "python s"],
    )  # fmt: skip
    differing = [case for row in rows for case in row["differing"]]
    shown = "".join(f"- `{s!r}`: jar `{j}`, ours `{o}`\n" for s, j, o in differing[: args.show])
    text = (
        f"{table}\n\nLoad average {load_before:.2f} before, {load_average():.2f} after. "
        f"{len(differing)} lines differ"
        + (f"; the first {args.show}:\n\n{shown}" if shown else ".\n")
    )
    print(text)
    if args.write:
        command = "python bench/agreement/ptb_agreement.py " + " ".join(
            argv if argv is not None else sys.argv[1:]
        )
        update_section(SECTION, f"{SECTION}\n\nCommand: `{command.strip()}`\n\n{text}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
