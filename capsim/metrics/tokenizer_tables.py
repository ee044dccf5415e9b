"""What pycocoevalcap's PTBTokenizer (CoreNLP 3.4.1) knows, found by probing the jar:
the words whose period it keeps, the sentence starters after an initial, the characters
it rewrites, and its letters, digits and deleted characters as regex classes
(ptb_characters.txt; bench/agreement/ptb_agreement.py --probe-characters rewrites it).
capsim.metrics.tokenizer's lexer reads them."""

from __future__ import annotations

from importlib import resources


def _words(text: str) -> list[str]:
    return text.split()


# Words whose period the jar keeps wherever they stand, found by probing every word of
# the real caption sets in three cases; a single letter (an initial) keeps it too. Those
# in PERIOD_BEFORE_LETTER keep it even before a letter ("Inc.N" -> "inc." "n", but
# "Mr.N" -> "mr.n").
PERIOD_BEFORE_LETTER = frozenset(
    _words("""AL APR ARIZ ARK AUG AZ Al Apr Ariz Ark Aug Az BLVD BROS Blvd Bros CALIF CO COLO
    CONN CORP COS CT Calif Co Colo Conn Corp Cos Ct DEC DEL Dec Del ED.D EST ETC EXT Ed.D
    Est Etc Ext FEB FLA Feb Fla GA Ga ILL INC Ill Inc JAN JR JUN Jan Jr Jun KAN KY Kan Ky
    LA LTD La Ltd MAR MASS MD MINN MISS MO MONT Mar Mass Md Minn Miss Mo Mont NEB NOV Neb
    Nov OCT OKLA ORE Oct Okla Ore PA PENN PH.D PLC Pa Penn Ph.D Plc RD RT Rd Rt SEPT SQ
    Sept Sq TEL TENN TEX THURS TUES Tel Tenn Tex Thurs Tues UNIV Univ VA Va WASH WED WIS
    Wash Wed Wis al apr ariz aug blvd bros calif co colo conn corp cos ct dec ed.d est etc
    ext feb fla ga inc jan jr jun kan ky ltd mar md minn mo mont neb nov oct okla penn ph.d
    plc rd rt sept sq tel tenn thurs tues univ va wed wis""")
)
ABBREVIATIONS = PERIOD_BEFORE_LETTER | frozenset(
    _words("""ALEX AVE Alex Ave BRIG Brig CAPT CF CMDR Capt Cf Cmdr DEPT DET DR DRS Dept Det
    Dr Drs FT Ft GEN GOV Gen Gov HON Hon INSP Insp JOS Jos LT Lt MAJ MR MRS MS MT Maj Mr Mrs
    Ms Mt PH PRES PROF Ph Pres Prof REP REPS REV Rep Reps Rev SEN SENS SGT ST STE Sen Sens
    Sgt St Ste VS Vs WM Wm alex ave brig capt cf cmdr dept det dr drs ft gen gov hon insp
    jos lt mr mrs ms mt ph pres prof rep reps rev sen sens sgt st ste vs wm""")
)
# Words whose period the jar keeps only before a number ("fig. 3", "no.5").
BEFORE_NUMBERS = frozenset(_words("art ca fig figs no nos op pp prop"))
# Capitalised words after which an initial's period is a full stop ("bulb A. The").
SENTENCE_STARTERS = frozenset(
    _words("""a about according additionally after an as at but earlier he her here however if in
    it last many more now once one other our she since so some such that the their then
    there these they this we what when while yet you""")
)
# Single characters the jar writes as something else (lower-cased).
CHARACTERS = {
    '"': "''", "(": "-lrb-", ")": "-rrb-", "[": "-lsb-", "]": "-rsb-", "{": "-lcb-",
    "}": "-rcb-", "\x80": "$", "\x91": "`", "\x92": "'", "\x93": "``", "\x94": "''",
    "\x96": "--", "\x97": "--", "\xa2": "cents", "\xa3": "#", "\xa4": "$", "\xab": "``",
    "\xad": "-", "\xbb": "''", "\xbc": "1/4", "\xbd": "1/2", "\xbe": "3/4", "\u2013": "--",
    "\u2014": "--", "\u2015": "--", "\u2018": "`", "\u2019": "'", "\u201b": "`",
    "\u201c": "``", "\u201d": "''", "\u2026": "...", "\u2039": "`", "\u203a": "'",
    "\u20a0": "$", "\u20ac": "$", "\u2153": "1/3", "\u2154": "2/3",
}  # fmt: skip
ASSIMILATIONS = {"cannot": ("can", "not"), "gonna": ("gon", "na"), "gotta": ("got", "ta"),
                 "wanna": ("wan", "na"), "gimme": ("gim", "me"), "lemme": ("lem", "me")}  # fmt: skip
QUOTES = "\x91\x92\x93\x94\xab\xbb\u2018\u2019\u201b\u201c\u201d\u2039\u203a"  # runs are one token


def _character_classes() -> dict[str, str]:
    """The jar's letters, digits and deleted characters as regex classes (ptb_characters.txt)."""
    text = resources.files("capsim.metrics").joinpath("ptb_characters.txt").read_text()
    classes: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.startswith("["):
            ranges = classes.setdefault(line.strip("[]"), [])
        elif line and not line.startswith("#"):
            for item in line.split():
                first, _, last = item.partition("-")
                ranges.append(
                    f"\\u{int(first, 16):04x}" + (f"-\\u{int(last, 16):04x}" if last else "")
                )
    return {name: "".join(ranges) for name, ranges in classes.items()}


_CLASSES = _character_classes()
# Java's letters and digits (for hyphenated words); a word may also hold marks and soft
# hyphens (the jar drops those, see capsim.metrics.tokenizer._written).
LETTER = f"[{_CLASSES['letters']}]"
LD = f"[{_CLASSES['letters']}{_CLASSES['digits']}]"
D = f"[{_CLASSES['digits']}]"
L = f"[{_CLASSES['letters']}{_CLASSES['marks']}\\u00ad]"
LMD = f"[{_CLASSES['letters']}{_CLASSES['marks']}\\u00ad{_CLASSES['digits']}]"
# Untokenizable: deleted, unless a rule reads it as part of a token (a URL, say).
DELETED = f"[{_CLASSES['deleted']}\\U00010000-\\U0010ffff]"
