"""SemEval STS 2012-2016, STS-B and SICK-R readers: scored sentence pairs (``StsSubset``).

capsim.eval.sts is the harness that scores a model on them. Where the original files come
from (for a user's own copy):

- STS 2012-2016: the SemEval task pages (https://ixa2.si.ehu.eus/stswiki), here
  in the ``<year>/<subset>.test.tsv`` layout of brmson/dataset-sts
  (``score<TAB>sentence1<TAB>sentence2``), plus ``2012-MSRvid/STS.input.MSRvid.txt``
  and ``STS.gs.MSRvid.txt`` in the SentEval layout.
- STS-B: ``sts-{train,dev,test}.csv`` of the STS Benchmark
  (https://ixa2.si.ehu.eus/stswiki/index.php/STSbenchmark).
- SICK: ``SICK.txt`` or ``SICK_test_annotated.txt`` of the SICK corpus
  (https://zenodo.org/records/2787612).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from pathlib import Path

import numpy as np

from capsim.errors import DataFormatError

logger = logging.getLogger(__name__)

STS_YEAR_DIRS = {
    "2012": "STS12",
    "2013": "STS13",
    "2014": "STS14",
    "2015": "STS15",
    "2016": "STS16",
}
STSB_YEAR = "STSB"
SICKR_YEAR = "SICKR"

# Test subsets of the official releases, to report which ones a copy lacks.
KNOWN_SUBSETS = {
    "STS12": ("MSRpar", "MSRvid", "OnWN", "SMTeuroparl", "SMTnews"),
    "STS13": ("FNWN", "OnWN", "SMT", "headlines"),
    "STS14": ("OnWN", "deft-forum", "deft-news", "headlines", "images", "tweet-news"),
    "STS15": ("answers-forums", "answers-students", "belief", "headlines", "images"),
    "STS16": ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}

TRAIN_SUFFIX = ".train.tsv"
MSRVID_DIR = "2012-MSRvid"
MSRVID_INPUT = "STS.input.MSRvid.txt"
MSRVID_GOLD = "STS.gs.MSRvid.txt"

STS_TSV_FIELDS = 3
SENTENCE_PAIR_FIELDS = 2
STSB_MIN_FIELDS = 7
STSB_SCORE_COLUMN = 4
STSB_SENTENCE_COLUMNS = (5, 6)
SICK_COLUMNS = ("pair_ID", "sentence_A", "sentence_B", "relatedness_score")
SICK_SET_COLUMN = "SemEval_set"


@dataclasses.dataclass
class StsSubset:
    """One scored subset: parallel sentence lists and their gold similarity scores."""

    year: str
    name: str
    sentences_a: list[str]
    sentences_b: list[str]
    scores: np.ndarray

    def __len__(self) -> int:
        return len(self.scores)


def _read_lines(path: Path) -> list[str]:
    """Lines split on LF only, so C1 controls such as U+0085 inside a sentence stay put."""
    raw = path.read_bytes()
    lines = []
    for number, chunk in enumerate(raw.split(b"\n"), start=1):
        try:
            lines.append(chunk.decode("utf-8").removesuffix("\r"))
        except UnicodeDecodeError as error:
            raise DataFormatError(path, f"not valid UTF-8 ({error.reason})", number) from error
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _parse_score(text: str, path: Path, line: int) -> float | None:
    """A gold score, or None for an unscored row (empty field), which must never read as 0."""
    text = text.strip()
    if not text:
        return None
    try:
        score = float(text)
    except ValueError:
        raise DataFormatError(path, f"score {text!r} is not a number", line) from None
    if not math.isfinite(score):
        raise DataFormatError(path, f"score {text!r} is not finite", line)
    return score


def _checked_sentence(text: str, path: Path, line: int) -> str:
    sentence = text.strip()
    if not sentence:
        raise DataFormatError(path, "empty sentence in a scored pair", line)
    return sentence


class _SubsetBuilder:
    """Collects scored pairs and counts unscored rows, which are dropped."""

    def __init__(self, year: str, name: str, path: Path):
        self.year, self.name, self.path = year, name, path
        self.sentences_a: list[str] = []
        self.sentences_b: list[str] = []
        self.scores: list[float] = []
        self.unscored = 0

    def add(
        self,
        score_text: str,
        sentence_a: str,
        sentence_b: str,
        line: int,
        score_path: Path | None = None,
    ) -> None:
        """Adds one row; ``score_path`` names the gold file when scores live apart from the text."""
        score = _parse_score(score_text, score_path or self.path, line)
        if score is None:
            self.unscored += 1
            return
        self.sentences_a.append(_checked_sentence(sentence_a, self.path, line))
        self.sentences_b.append(_checked_sentence(sentence_b, self.path, line))
        self.scores.append(score)

    def build(self) -> StsSubset:
        if not self.scores:
            raise DataFormatError(self.path, "no scored pairs")
        if self.unscored:
            logger.info("%s: dropped %d unscored rows", self.path, self.unscored)
        return StsSubset(
            self.year,
            self.name,
            self.sentences_a,
            self.sentences_b,
            np.asarray(self.scores, dtype=np.float64),
        )


def _split_fields(
    line: str, path: Path, number: int, expected: int, *, at_least: bool = False
) -> list[str]:
    fields = line.split("\t")
    if len(fields) < expected or (not at_least and len(fields) != expected):
        wanted = f"at least {expected}" if at_least else str(expected)
        raise DataFormatError(
            path, f"expected {wanted} tab-separated fields, found {len(fields)}", number
        )
    return fields


def read_sts_tsv(path: str | Path, year: str, name: str | None = None) -> StsSubset:
    """Reads one ``score<TAB>sentence1<TAB>sentence2`` file (no quoting, empty score = unscored)."""
    path = Path(path)
    name = name or path.name.removesuffix(".tsv").removesuffix(".test")
    builder = _SubsetBuilder(year, name, path)
    for number, line in enumerate(_read_lines(path), start=1):
        score, sentence_a, sentence_b = _split_fields(line, path, number, STS_TSV_FIELDS)
        builder.add(score, sentence_a, sentence_b, number)
    return builder.build()


def read_input_and_gold(
    input_path: str | Path, gold_path: str | Path, year: str, name: str
) -> StsSubset:
    """Reads the SentEval layout: ``sentence1<TAB>sentence2`` lines and a parallel score file."""
    input_path, gold_path = Path(input_path), Path(gold_path)
    inputs, golds = _read_lines(input_path), _read_lines(gold_path)
    if len(inputs) != len(golds):
        raise DataFormatError(
            gold_path,
            f"{len(golds)} score lines but {input_path} has {len(inputs)} sentence lines",
            min(len(inputs), len(golds)) + 1,
        )
    builder = _SubsetBuilder(year, name, input_path)
    for number, (line, gold) in enumerate(zip(inputs, golds, strict=True), start=1):
        sentence_a, sentence_b = _split_fields(line, input_path, number, SENTENCE_PAIR_FIELDS)
        builder.add(gold, sentence_a, sentence_b, number, score_path=gold_path)
    return builder.build()


def read_sts_dir(data_dir: str | Path) -> dict[str, list[StsSubset]]:
    """Reads the STS 2012-2016 test subsets under ``data_dir``, keyed "STS12".."STS16".

    Years without any subset are left out. ``*.train.tsv`` files (the 2012
    training release) are skipped; MSRvid from ``2012-MSRvid/`` joins STS12.
    """
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise FileNotFoundError(f"STS data folder {data_dir} does not exist")
    result: dict[str, list[StsSubset]] = {}
    for year_dir, year in STS_YEAR_DIRS.items():
        paths = sorted(
            path
            for path in (data_dir / year_dir).glob("*.tsv")
            if not path.name.endswith(TRAIN_SUFFIX)
        )
        subsets = [read_sts_tsv(path, year) for path in paths]
        msrvid_dir = data_dir / MSRVID_DIR
        if year == "STS12" and (msrvid_dir / MSRVID_INPUT).is_file():
            subsets.append(
                read_input_and_gold(
                    msrvid_dir / MSRVID_INPUT, msrvid_dir / MSRVID_GOLD, year, "MSRvid"
                )
            )
        subsets.sort(key=lambda subset: subset.name)
        found = [subset.name for subset in subsets]
        missing = [name for name in KNOWN_SUBSETS[year] if name not in found]
        logger.info("%s: found %s (%d scored pairs)", year, found, sum(len(s) for s in subsets))
        if missing:
            logger.info("%s: missing well-known subsets %s", year, missing)
        if subsets:
            result[year] = subsets
    if not result:
        raise DataFormatError(data_dir, "no STS files found (expected <year>/<subset>.test.tsv)")
    return result


def read_sts_benchmark(path: str | Path) -> StsSubset:
    """Reads an STS-B csv (tab-separated: genre, file, year, id, score, s1, s2, [extra...])."""
    path = Path(path)
    builder = _SubsetBuilder(STSB_YEAR, path.name.removesuffix(".csv"), path)
    a_column, b_column = STSB_SENTENCE_COLUMNS
    for number, line in enumerate(_read_lines(path), start=1):
        fields = _split_fields(line, path, number, STSB_MIN_FIELDS, at_least=True)
        builder.add(fields[STSB_SCORE_COLUMN], fields[a_column], fields[b_column], number)
    return builder.build()


def read_sick(path: str | Path, semeval_set: str | None = None) -> StsSubset:
    """Reads SICK relatedness (SICK-R) from ``SICK.txt`` or ``SICK_test_annotated.txt``.

    Columns are found by the header. ``semeval_set`` ("TRAIN", "TRIAL" or "TEST")
    keeps only that part of the full ``SICK.txt``; SICK-R results are usually
    reported on "TEST".
    """
    path = Path(path)
    lines = _read_lines(path)
    if not lines:
        raise DataFormatError(path, "empty file")
    header = lines[0].split("\t")
    wanted = SICK_COLUMNS + ((SICK_SET_COLUMN,) if semeval_set else ())
    absent = [column for column in wanted if column not in header]
    if absent:
        raise DataFormatError(path, f"header lacks columns {absent}", 1)
    index = {column: header.index(column) for column in wanted}
    name = path.name.removesuffix(".txt") + (f":{semeval_set}" if semeval_set else "")
    builder = _SubsetBuilder(SICKR_YEAR, name, path)
    for number, line in enumerate(lines[1:], start=2):
        fields = _split_fields(line, path, number, len(header))
        if semeval_set and fields[index[SICK_SET_COLUMN]] != semeval_set:
            continue
        builder.add(
            fields[index["relatedness_score"]],
            fields[index["sentence_A"]],
            fields[index["sentence_B"]],
            number,
        )
    return builder.build()
