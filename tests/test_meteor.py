"""METEOR 1.5 without Java against pycocoevalcap's meteor-1.5.jar, the oracle wherever Java runs."""

from __future__ import annotations

import concurrent.futures
import gzip
import json
import os
import random
import shutil
import time
import types
from pathlib import Path

import numpy as np
import pytest

from bench.agreement.meteor_agreement import TIED, TIED_JAR_SCORES, jar_eval, random_statistics
from capsim import cache
from capsim.errors import CaptionError
from capsim.metrics.meteor import (
    Meteor,
    MeteorResourceError,
    corpus_stats,
    meteor_from_stats,
    resources,
    tables,
)
from capsim.metrics.meteor import normalize as normalize_module
from capsim.metrics.meteor import scorer as scorer_module
from capsim.metrics.meteor.alignment import align
from capsim.metrics.meteor.lexicon import Lexicon
from capsim.metrics.meteor.matching import EXACT, PARAPHRASE, STEM
from capsim.metrics.meteor.normalize import normalize
from capsim.metrics.meteor.statistics import CHUNKS

TOLERANCE = 1e-6
GOLDEN_FILE = "golden/pycocoevalcap_flickr8k_expert.json"


AWKWARD = {
    "punctuation": (
        "A man, in a red-and-white shirt, rides a bike; the crowd cheers!",
        ["A man (wearing red) rides his bicycle.", "The crowd cheers: a cyclist in red!"],
    ),
    "hyphens": (
        "A well-known state-of-the-art x-ray machine -- on a half-pipe.",
        ["A well known state of the art X-ray machine", "an x ray machine on a half pipe"],
    ),
    "numbers": (
        "3 dogs and 1,000 birds at 12:30 on 5/6, 2nd place, 50% off $5.99",
        ["Three dogs and 1000 birds at 12 : 30", "2 dogs, 1,000 birds, 50 % off, $ 5.99"],
    ),
    "repeated_words": (
        "a dog a dog a dog runs runs with a dog",
        ["a dog runs with a dog", "dogs run with a dog and a dog"],
    ),
    "empty_candidate": ("", ["a cat sits on a mat", "a mat"]),
    "one_word_candidate": ("dog", ["a dog runs in the park"]),
    "equal_to_a_reference": (
        "A child plays with a red ball in the garden.",
        ["A child plays with a red ball in the garden.", "a kid in a garden", "a ball"],
    ),
    "non_ascii": (
        "Un café crème à Zürich — naïve “smart” quotes’ test 中文 😀",
        ["A café in Zürich with naïve quotes", "cafe creme a zurich"],
    ),
    "abbreviations": (
        "Mr. Smith and Dr. Jones met at the U.S. Army base, etc.",
        ["Mr. Smith met Dr. Jones at a U.S. base."],
    ),
    "apostrophes": (
        "It's the dog's bone, isn't it? The dogs' bowls aren't full.",
        ["It is the dog 's bone", "the dogs ' bowls are not full"],
    ),
    "separator_in_candidate": ("a dog ||| on the grass", ["a dog on the grass"]),
    "stem_only": ("the runners jumped", ["the runner jumps"]),
    "synonym_only": ("a big automobile", ["a big car"]),
    "paraphrase_only": ("a man is playing the guitar", ["a person plays a guitar"]),
    # The jar keeps no match here: ambiguous stems and synonyms that would start chunks.
    "unanchored_stems_and_synonyms": ("the runner jumped quickly", ["runners jump quick"]),
}

# Tokens printed by `meteor-1.5.jar -norm -writeAlignments` for these lines.
NORMALIZED = {
    "Hello, World! It's a dog's life -- isn't it?": "hello , world ! it 's a dog 's life - isn 't it ?",
    "A baby cries in a woman 's arms .": "a baby cries in a woman ' s arms .",
    "U.S.A. and Mr. Smith vs. Dr. Jones etc. e.g. i.e.": "usa and mr. smith vs. dr. jones etc. eg ie",
    "mr. Smith, No. 5 and no. 6": "mr . smith , no. 5 and no . 6",
    "a-b-c well-known 3-4 -3 a--b": "a b-c well known 3 4 -3 a b",
    "1,000 1, 000 a,b,c 3.5 5.": "1,000 1 , 000 a , b,c 3.5 5 .",
    "...leading and trailing...": "... leading and trailing ...",
    "ΑΒΓ Привет 日本語 😀😃 café": "α β γ привет 日 本 語 😀 😃 café",
    "’curly’ “double” ``tex''": '\' curly \' " double " " tex "',
    "a\u00a0b\tc\u3000d": "a b c d",
    "a–b": "a - b",
    "&amp; AT&T a/b": "& amp ; at & t a / b",
}


def _meteor_or_skip() -> Meteor:
    try:
        return Meteor()
    except MeteorResourceError as error:
        pytest.skip(str(error))


@pytest.fixture(scope="module")
def meteor() -> Meteor:
    return _meteor_or_skip()


@pytest.fixture(scope="module")
def jar_meteor():
    """pycocoevalcap's Meteor (Java): one JVM for the module, as users run it."""
    if shutil.which("java") is None:
        pytest.skip("the jar oracle needs Java on PATH")
    from pycocoevalcap.meteor.meteor import Meteor

    scorer = Meteor()
    yield scorer
    del scorer  # its __del__ stops the JVM


def assert_scores_equal(ids, expected, scores) -> None:
    """Every caption's score within TOLERANCE of the jar's, naming the ones that are not."""
    differing = {
        caption_id: (want, got)
        for caption_id, want, got in zip(ids, expected, scores, strict=True)
        if abs(want - got) > TOLERANCE
    }
    assert not differing, f"{len(differing)} captions differ (jar, ours): {differing}"


def assert_agrees_with_the_jar(meteor, jar_meteor, gts, res) -> None:
    jar_corpus, jar_scores = jar_meteor.compute_score(gts, res)
    corpus, scores = meteor.compute_score(gts, res)
    assert_scores_equal(list(gts), jar_scores, scores)
    assert corpus == pytest.approx(jar_corpus, abs=TOLERANCE)


@pytest.mark.parametrize("text", list(NORMALIZED))
def test_normalization_matches_the_jar(meteor, text):
    data = resources.jar_data(resources.locate_files().jar)
    assert " ".join(normalize(text, data.prefixes, data.numeric_prefixes)) == NORMALIZED[text]


def test_plain_text_skips_the_rules_with_the_same_tokens(meteor):
    """Lower-case letters, digits and spaces take the short path: its tokens equal
    every rule's on random plain strings, and a period or capital takes the long one."""
    data, rng = meteor._data, random.Random(0)
    for _ in range(2000):
        text = "".join(rng.choice("ab z09  ") for _ in range(rng.randrange(12)))
        expected = normalize_module._normalized(text, data.prefixes, data.numeric_prefixes)
        assert normalize(text, data.prefixes, data.numeric_prefixes) == expected, repr(text)
    for text in ("a dog .", "A dog", "dog 's", "e.g. a"):
        assert not normalize_module._PLAIN.fullmatch(text)


def test_score_formula_matches_the_jar_on_known_statistics():
    # Statistics and scores printed by the jar (SCORE then EVAL lines).
    stats = {
        "shorter": [3, 4, 1, 1, 2, 2, 1, 1] + [0] * 12 + [1, 3, 3],
        "longer": [4, 3, 1, 1, 2, 2, 1, 1] + [0] * 12 + [1, 3, 3],
        "perfect": [2, 2, 1, 1, 1, 1, 1, 1] + [0] * 12 + [1, 2, 2],
        "extra_word": [3, 2, 2, 1, 1, 1, 1, 1] + [0] * 12 + [1, 2, 2],
    }
    expected = {
        "shorter": 0.3799461194352912,
        "longer": 0.48704502558483637,
        "perfect": 1.0,
        "extra_word": 0.46040449351549445,
    }
    for name, value in expected.items():
        assert meteor_from_stats(stats[name]) == pytest.approx(value, abs=1e-12)
    assert meteor_from_stats([0, 3, 0, 1] + [0] * 19) == 0.0  # an empty candidate
    # The jar's EVAL over the four lines: its own aggregate, not their mean (0.5817),
    # in which the perfect line adds no chunk (a plain sum would give 0.4378).
    corpus = corpus_stats(list(stats.values()))
    assert corpus[-3] == 3
    assert meteor_from_stats(corpus) == pytest.approx(0.46221706839461557, abs=1e-12)


def test_a_tie_in_exact_arithmetic_breaks_as_in_the_jar():
    from fractions import Fraction

    def exact(stats):  # the formula in exact arithmetic: a true tie
        alpha, delta = Fraction(85, 100), Fraction(3, 4)
        test_len, ref_len, test_func, ref_func, content, _, function, _ = stats[:8]
        matched = delta * content + (1 - delta) * function
        precision = matched / (delta * (test_len - test_func) + (1 - delta) * test_func)
        recall = matched / (delta * (ref_len - ref_func) + (1 - delta) * ref_func)
        return precision * recall / (alpha * precision + (1 - alpha) * recall)

    assert exact(TIED[0]) == exact(TIED[1])
    assert TIED[0][-3] / TIED[0][-2] == TIED[1][-3] / TIED[1][-2]  # the same fragmentation
    assert tuple(meteor_from_stats(s) for s in TIED) == TIED_JAR_SCORES  # bit for bit


def test_the_score_is_the_jars_to_the_last_bit(jar_meteor):
    """Random statistics through the jar's EVAL: equal bit for bit, but where the JVM's
    Math.pow rounds a fragmentation differently from C's pow (1 of 746 values seen: a
    1-ulp difference)."""
    assert tuple(jar_eval(jar_meteor, s) for s in TIED) == TIED_JAR_SCORES
    rng, equal, near = random.Random(1), 0, 0
    for _ in range(400):
        stats = random_statistics(rng)
        jar, ours = jar_eval(jar_meteor, stats), meteor_from_stats(stats)
        equal += jar == ours
        near += abs(jar - ours) <= 2 * np.spacing(jar)
    assert near == 400 and equal >= 396, (equal, near)


def _found(*rows) -> np.ndarray:
    """Candidate matches as matching.candidates gives them: (reference start, candidate
    start, candidate length, reference length, module), in rank order."""
    return np.array(rows, dtype=np.int64).reshape(-1, 5)


def test_alignment_credits_a_two_word_paraphrase_as_an_exact_match():
    """Exact: +2; otherwise test words // 2 + reference words // 2. A 2-to-2 paraphrase
    ties with the exact word inside it and, after both chunks close, wins as the partial
    ranked first at the reference's last word; a one-to-one stem earns nothing and loses."""
    exact, paraphrase = (0, 0, 1, 1, EXACT), (0, 0, 2, 2, PARAPHRASE)
    assert align(2, 2, _found(exact, paraphrase)).tolist() == [1]
    assert align(2, 2, _found(exact, (0, 1, 1, 1, STEM))).tolist() == [0]


def test_alignment_adds_a_branch_distance_to_its_parent():
    """Reference "y a", candidate "a a": the second branch inherits the first's distance
    (|1 - 0|), so the first occurrence wins although the second sits at the same position."""
    assert align(2, 2, _found((1, 0, 1, 1, EXACT), (1, 1, 1, 1, EXACT))).tolist() == [0]


def test_alignment_of_nothing_and_of_fixed_matches():
    assert align(0, 3, _found()).tolist() == []
    # Each candidate the only one at its words: all taken, whatever their order.
    assert align(3, 3, _found((0, 2, 1, 1, EXACT), (2, 0, 1, 1, STEM))).tolist() == [0, 1]


def test_the_beam_keeps_forty_partials_of_a_long_repetitive_pair(meteor):
    """Sixty words of "a a a ...": thousands of candidate matches, each word aligned with
    the one at its own position (no distance, one chunk)."""
    words = " ".join(["a"] * 60)
    stats = meteor.statistics({0: [words]}, {0: [words]})
    assert stats[0, CHUNKS:].tolist() == [1, 60, 60]
    assert meteor_from_stats(stats[0]) == 1.0


def test_awkward_inputs_equal_the_jar(meteor, jar_meteor):
    """Hand-made hard cases (one to three references per id), each to 1e-6, and the corpus."""
    gts = {name: refs for name, (_, refs) in AWKWARD.items()}
    res = {name: [candidate] for name, (candidate, _) in AWKWARD.items()}
    jar_corpus, jar_scores = jar_meteor.compute_score(gts, res)
    corpus, scores = meteor.compute_score(gts, res)
    assert dict(zip(gts, scores, strict=True)) == pytest.approx(
        dict(zip(gts, jar_scores, strict=True)), abs=TOLERANCE
    )
    assert corpus == pytest.approx(jar_corpus, abs=TOLERANCE)
    assert corpus != pytest.approx(np.mean(scores), abs=TOLERANCE)  # an aggregate, not a mean
    assert scores[list(gts).index("stem_only")] > 0
    assert scores[list(gts).index("paraphrase_only")] > 0


def _long_captions(data: Path, count: int) -> tuple[dict, dict]:
    """60-odd-token candidates: four COCO captions of an image run together."""
    by_image: dict[int, list[str]] = {}
    for row in json.loads((data / "coco" / "captions_val2017.json").read_text())["annotations"]:
        by_image.setdefault(row["image_id"], []).append(" ".join(row["caption"].split()))
    gts, res = {}, {}
    for image, captions in sorted(by_image.items()):
        if len(captions) >= 5 and len(res) < count:
            res[image] = [" ".join(captions[:4] + captions[:1])]
            gts[image] = [captions[4], captions[1]]
    return gts, res


def test_long_captions_agree_with_the_jar(meteor, jar_meteor, shared_data):
    gts, res = _long_captions(shared_data, 30)
    assert min(len(c.split()) for (c,) in res.values()) >= 40
    assert max(len(c.split()) for (c,) in res.values()) >= 60
    assert_agrees_with_the_jar(meteor, jar_meteor, gts, res)


def _flickr8k_expert(data: Path, count: int) -> tuple[dict, dict]:
    from capsim.eval.judgment_sets import load_set

    pairs: dict[tuple[str, str], tuple[str, ...]] = {}
    for judgment in load_set("flickr8k_expert", data / "flickr8k"):
        pairs.setdefault((judgment.image_id, judgment.candidate), judgment.references)
    chosen = sorted(pairs.items())[:: max(1, len(pairs) // count)][:count]
    gts = {f"{image}/{n}": list(refs) for n, ((image, _), refs) in enumerate(chosen)}
    res = {f"{image}/{n}": [cand] for n, ((image, cand), _) in enumerate(chosen)}
    return gts, res


def _coco_leave_one_out(data: Path, count: int) -> tuple[dict, dict]:
    """Each COCO caption against the other captions of its image (line breaks flattened)."""
    by_image: dict[int, list[dict]] = {}
    for row in json.loads((data / "coco" / "captions_val2017.json").read_text())["annotations"]:
        by_image.setdefault(row["image_id"], []).append(row)
    gts, res = {}, {}
    for rows in list(by_image.values())[:: max(1, len(by_image) // count)]:
        row = rows[0]
        res[row["id"]] = [" ".join(row["caption"].split())]
        gts[row["id"]] = [" ".join(r["caption"].split()) for r in rows[1:]]
    return gts, res


@pytest.mark.parametrize("name", ["flickr8k", "coco"])
def test_real_captions_agree_with_the_jar(meteor, jar_meteor, shared_data, name):
    reader = _flickr8k_expert if name == "flickr8k" else _coco_leave_one_out
    gts, res = reader(shared_data, 300)
    assert len(res) >= 250
    assert_agrees_with_the_jar(meteor, jar_meteor, gts, res)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["flickr8k", "coco"])
def test_every_caption_agrees_with_the_jar(meteor, jar_meteor, shared_data, name):
    """Every Flickr8k-Expert candidate; one caption of every COCO val2017 image."""
    reader = _flickr8k_expert if name == "flickr8k" else _coco_leave_one_out
    gts, res = reader(shared_data, 10**6)
    assert len(res) >= 5000
    assert_agrees_with_the_jar(meteor, jar_meteor, gts, res)


def test_golden_pycocoevalcap_values(meteor, shared_data):
    """Java-free: the stored pycocoevalcap 1.2 METEOR of every fourth Flickr8k-Expert pair."""
    rows = json.loads((shared_data / GOLDEN_FILE).read_text())["rows"][::4]
    gts = {row["key"]: row["references"] for row in rows}
    res = {row["key"]: [row["candidate"]] for row in rows}
    _, scores = meteor.compute_score(gts, res)
    assert_scores_equal(list(gts), [row["METEOR"] for row in rows], scores)


def test_the_best_reference_wins_and_the_first_wins_a_tie(meteor):
    gts = {"k": ["a cat", "a dog runs on the grass", "a dog runs on the grass"]}
    res = {"k": ["a dog runs on grass"]}
    alone = [meteor.statistics({"k": [r]}, res)[0] for r in gts["k"]]
    assert meteor.statistics(gts, res)[0].tolist() == alone[1].tolist()
    flipped = {"k": [gts["k"][1], gts["k"][0]]}
    assert meteor.statistics(flipped, res)[0].tolist() == alone[1].tolist()


def test_scores_follow_the_order_of_gts(meteor):
    gts = {"b": ["a cat sleeps"], "a": ["a dog runs on the grass"]}
    res = {"a": ["a dog runs"], "b": ["a cat"]}
    _, scores = meteor.compute_score(gts, res)
    _, alone = meteor.compute_score({"b": gts["b"]}, {"b": res["b"]})
    assert scores[0] == alone[0]


@pytest.mark.parametrize(
    ("gts", "res", "message"),
    [
        ({"a": ["x"]}, {"a": ["x"], "b": ["y"]}, r"caption 'b': has a candidate in res but no"),
        (
            {"a": ["x"], 7: ["y"]},
            {"a": ["x"]},
            r"caption 7: has references in gts but no candidate",
        ),
        ({"a": ["x"]}, {"a": [3]}, r"caption 'a': captions must be strings, got 3"),
        ({"a": ["x", None]}, {"a": ["x"]}, r"caption 'a': captions must be strings, got None"),
        ({"a": ["x"]}, {"a": ["x", "y"]}, r"caption 'a': res must map it to a list with one"),
        ({"a": ["x"]}, {"a": "x"}, r"caption 'a': res must map it to a list with one"),
        ({"a": []}, {"a": ["x"]}, r"caption 'a': gts must map it to a non-empty list"),
        ({"a": "x y"}, {"a": ["x"]}, r"caption 'a': gts must map it to a non-empty list"),
        ({"a": ["x ||| y"]}, {"a": ["x"]}, r"caption 'a': reference 'x \|\|\| y' holds '\|\|\|'"),
        ({"a": ["x"]}, {"a": ["x\ny"]}, r"caption 'a': caption 'x\\ny' holds a line break"),
    ],
)
def test_bad_inputs_name_the_caption(meteor, gts, res, message):
    with pytest.raises(CaptionError, match=message):
        meteor.compute_score(gts, res)


def test_empty_input_is_refused(meteor):
    with pytest.raises(ValueError, match="gts is empty"):
        meteor.compute_score({}, {})


def test_missing_pycocoevalcap_names_the_install(monkeypatch):
    monkeypatch.setattr(resources.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MeteorResourceError, match=r"pip install pycocoevalcap==1\.2"):
        Meteor()


def test_missing_data_file_names_the_file_and_the_install(monkeypatch, tmp_path):
    (tmp_path / "meteor").mkdir()

    spec = types.SimpleNamespace(submodule_search_locations=[str(tmp_path)])
    monkeypatch.setattr(resources.importlib.util, "find_spec", lambda name: spec)
    with pytest.raises(
        MeteorResourceError, match=r"meteor-1\.5\.jar is missing.*pycocoevalcap==1\.2"
    ):
        resources.locate_files()


def _write_table(path: Path, lines: list[tuple[str, str]]) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        for source, target in lines:
            handle.write(f"0.5\n{source}\n{target}\n")


def test_paraphrase_index_is_cached_on_disk_and_rebuilt_when_its_source_changes(
    monkeypatch, tmp_path
):
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    source = tmp_path / "paraphrase-en.gz"
    _write_table(source, [("a big dog", "a large dog"), ("big", "large"), ("large", "big")])
    build = resources.paraphrase_index.__wrapped__  # the on-disk cache, not the in-process one
    index = build(source)
    ids = index.ids(resources.phrase_hashes(["big", "large", "a big dog", "absent", "a big"]))
    assert ids[3] == ids[4] == -1 and min(ids[:3]) >= 0
    # "a" and "a big" begin a phrase without being one: the matcher reads on past them.
    prefixes = np.searchsorted(index.keys, resources.phrase_hashes(["a", "a big"]))
    assert (index.kinds[prefixes] == resources.PREFIX).all()
    assert index.kinds[ids[0]] == resources.PHRASE
    big, large = int(ids[0]), int(ids[1])
    assert index.paraphrases[index.paraphrase_at[big] : index.paraphrase_at[big + 1]] == [large]
    assert index.paraphrases[index.paraphrase_at[large] : index.paraphrase_at[large + 1]] == [big]
    assert index.max_words == 3
    folder = next((tmp_path / "cache").iterdir())
    manifest = json.loads((folder / "paraphrase.json").read_text())
    assert manifest["size"] == source.stat().st_size and len(manifest["sha256"]) == 64

    built = {p.name: p.stat().st_mtime_ns for p in folder.glob("*.npy")}
    os.utime(source)  # touched, unchanged: the index is reused
    assert build(source).max_words == 3
    assert {p.name: p.stat().st_mtime_ns for p in folder.glob("*.npy")} == built

    _write_table(source, [("a big brown dog", "a dog"), ("big", "large")])  # changed: rebuilt
    rebuilt = build(source)
    assert rebuilt.max_words == 4
    assert json.loads((folder / "paraphrase.json").read_text())["sha256"] != manifest["sha256"]


def test_concurrent_builders_build_the_index_once(monkeypatch, tmp_path):
    """Two builders at once (xdist workers, parallel jobs): the second waits for the first's
    index and loads it."""
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    source = tmp_path / "paraphrase-en.gz"
    _write_table(source, [("big", "large"), ("large", "big")])
    builds, real_build = [], resources._build_index

    def slow_build(path: Path) -> resources.ParaphraseIndex:
        builds.append(path)
        time.sleep(0.5)  # the other builder arrives while this one works
        return real_build(path)

    monkeypatch.setattr(resources, "_build_index", slow_build)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        indexes = list(pool.map(resources.paraphrase_index.__wrapped__, [source, source]))
    assert len(builds) == 1
    assert [index.max_words for index in indexes] == [1, 1]
    np.testing.assert_array_equal(indexes[0].keys, indexes[1].keys)


def _golden_sample(shared_data, step: int) -> tuple[dict, dict]:
    rows = json.loads((shared_data / GOLDEN_FILE).read_text())["rows"][::step]
    gts = {row["key"]: row["references"] for row in rows}
    return gts, {row["key"]: [row["candidate"]] for row in rows}


def test_the_lexicon_numbers_words_once_and_its_tables_only_grow(meteor):
    """A word keeps its id across calls; tables handed out stay valid as they grow."""
    lexicon = Lexicon(meteor._data)
    dog, dogs, the = lexicon.ids(["dog", "dogs", "the"]).tolist()
    before = lexicon.tables()
    words = [f"zz{k}" for k in range(3000)] + ["dogs", "running"]
    again = lexicon.ids(words)
    after = lexicon.tables()
    assert again[-2] == dogs and len(set(again.tolist())) == len(words)
    assert len(after.stems) == 3 + 3001 and len(before.stems) == 3
    for name in ("stems", "function", "hashes"):
        assert np.array_equal(getattr(after, name)[:3], getattr(before, name))
    assert after.stems[dog] == after.stems[dogs] != after.stems[the]
    assert after.function[the] and not after.function[dog]
    assert after.hashes[again[-1]] == resources.word_hash("running")

    def synsets(word_id):
        return after.synsets[after.synset_at[word_id] : after.synset_at[word_id + 1]].tolist()

    assert synsets(dog) and synsets(dogs) == synsets(dog)  # WordNet's -s rule
    assert synsets(again[0]) == []


def test_words_are_numbered_as_first_met_across_sentences_and_table_growth():
    """The compiled numbering splits at runs of spaces, keeps multi-byte characters whole
    and numbers words as a dict would, past the growth of its table."""
    rng = random.Random(0)
    alphabet = ["a", "b", "é", "狗", "\x0b", "z"]
    for case in range(30):
        sentences = [
            " " * rng.randrange(3)
            + (" " * rng.randrange(1, 3)).join(
                "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 4 + case // 5)))
                for _ in range(rng.randrange(0, 40))
            )
            + " " * rng.randrange(3)
            for _ in range(rng.randrange(1, 12))
        ]
        encoded = [s.encode() for s in sentences]
        ends = np.cumsum([len(e) + 1 for e in encoded]) - 1
        text = np.frombuffer(b" ".join(encoded), np.uint8)
        sentence_at, ids, firsts = tables.number_words(text, ends)
        numbers: dict[str, int] = {}
        expected = [
            numbers.setdefault(w, len(numbers)) for s in sentences for w in s.split(" ") if w
        ]
        assert ids.tolist() == expected
        assert (
            sentence_at.tolist()
            == np.cumsum(
                [0] + [len(s.split(" ")) - s.split(" ").count("") for s in sentences]
            ).tolist()
        )
        joined = b" ".join(encoded)
        assert [joined[a:b].decode() for a, b in firsts.tolist()] == list(numbers)


def test_phrases_are_found_numbered_and_linked_as_the_table_lists_them(monkeypatch, tmp_path):
    """On a generated table: every span of a sentence that is a phrase of the table, the
    call's phrases numbered in key order, and each linked to its listed paraphrases that
    the call holds, with their table lines."""
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    source = tmp_path / "paraphrase-en.gz"
    pairs = [("a big dog", "a large dog"), ("big", "large"), ("large", "big"), ("dog", "hound")]
    pairs += [("big dog", "cat"), ("the big", "that big")]
    _write_table(source, pairs)
    index = resources.paraphrase_index.__wrapped__(source)
    sentences = [["a", "big", "dog", "runs"], ["the", "large", "dog"], ["a", "big", "cat"]]
    vocabulary = list(dict.fromkeys(w for s in sentences for w in s))
    words = np.array([vocabulary.index(w) for s in sentences for w in s])
    sentence_at = np.cumsum([0] + [len(s) for s in sentences])
    hashes = np.array([resources.word_hash(w) for w in vocabulary], np.uint64)
    span_at, start, length, phrase, reach_at, reach_target, reach_line = tables.phrase_tables(
        sentence_at, words, hashes, index.arrays
    )
    table = {a for a, _ in pairs} | {b for _, b in pairs}
    expected = [
        (s, i, n) for s, words_of in enumerate(sentences) for i in range(len(words_of))
        for n in range(1, len(words_of) - i + 1) if " ".join(words_of[i : i + n]) in table
    ]  # fmt: skip
    found = [
        (s, int(start[k]), int(length[k]))
        for s in range(3)
        for k in range(span_at[s], span_at[s + 1])
    ]
    assert found == expected
    texts = [" ".join(sentences[s][i : i + n]) for s, i, n in found]
    keys = index.ids(resources.phrase_hashes(texts))
    present = sorted(set(keys.tolist()))
    assert [present[p] for p in phrase] == keys.tolist()
    by_key = {int(index.ids(resources.phrase_hashes([t]))[0]): t for t in texts}
    links = {
        (by_key[present[p]], by_key[present[reach_target[k]]], int(reach_line[k]))
        for p in range(len(present)) for k in range(reach_at[p], reach_at[p + 1])
    }  # fmt: skip
    # Of the listed pairs, those whose both sides the sentences hold, with their lines.
    assert links == {(a, b, line) for line, (a, b) in enumerate(pairs) if a in texts and b in texts}


def test_threads_give_the_statistics_of_one(meteor, shared_data, monkeypatch):
    gts, res = _golden_sample(shared_data, 20)  # 284 captions
    monkeypatch.setattr(scorer_module, "PART_MIN_CAPTIONS", 8)
    alone = Meteor(threads=1).statistics(gts, res)
    assert np.array_equal(Meteor(threads=3).statistics(gts, res), alone)
    pending = Meteor(threads=2).start(gts, res)  # scored in threads meanwhile
    assert np.array_equal(Meteor(threads=4).statistics(gts, res), alone)
    assert np.array_equal(pending(), alone)


def test_the_environment_sets_the_threads(meteor, monkeypatch):
    monkeypatch.setenv(scorer_module.THREADS_VARIABLE, "3")
    assert Meteor()._threads == 3
    for wrong in ("x", "0", "-1"):
        monkeypatch.setenv(scorer_module.THREADS_VARIABLE, wrong)
        with pytest.raises(ValueError, match=f"CAPSIM_METEOR_THREADS must be .* got '{wrong}'"):
            Meteor()
