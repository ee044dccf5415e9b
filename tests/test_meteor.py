"""Pure-Python METEOR 1.5 against pycocoevalcap's meteor-1.5.jar, the oracle wherever Java runs."""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import types
from pathlib import Path

import numpy as np
import pytest
from conftest import import_extra

from capsim import cache
from capsim.errors import CaptionError
from capsim.eval.meteor import (
    Meteor,
    MeteorResourceError,
    corpus_stats,
    meteor_from_stats,
    resources,
    workers,
)
from capsim.eval.meteor import normalize as normalize_module
from capsim.eval.meteor import scorer as scorer_module
from capsim.eval.meteor.matching import (
    EXACT,
    PARAPHRASE,
    STEM,
    Match,
    align,
    candidates,
    longest_chunk,
    statistics,
)
from capsim.eval.meteor.normalize import normalize
from capsim.eval.meteor.scorer import score_bound
from capsim.eval.ptb import ptb_tokenize

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
    scorer = import_extra("pycocoevalcap.meteor.meteor").Meteor()
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


def _candidate(ref: int, test: int, test_len: int, ref_len: int, module: int) -> tuple:
    return (ref, (module, test), test, test_len, ref_len, module)


def test_longest_chunk_is_the_heaviest_chain_contiguous_in_both_sentences():
    # (ref start, rank, test start, test length, ref length, module)
    found = [
        (0, (EXACT, 0), 0, 1, 1, EXACT),  # test 0 - ref 0
        (1, (EXACT, 1), 1, 1, 1, EXACT),  # test 1 - ref 1: chains on from the first
        (2, (PARAPHRASE, 1, 2, 2, 0), 2, 2, 1, PARAPHRASE),  # test 2-3 - ref 2: and on
        (0, (EXACT, 4), 4, 1, 1, EXACT),  # test 4 - ref 0: no chain onwards
        (3, (STEM, 5), 5, 1, 1, STEM),  # test 5 - ref 3: test 4 ends elsewhere
    ]
    assert longest_chunk(found) == 1 + 1 + (2 + 1) / 2
    assert longest_chunk(found[3:]) == 1
    assert longest_chunk([]) == 0


def test_alignment_credits_a_two_word_paraphrase_as_an_exact_match():
    """Exact: +2; otherwise test words // 2 + reference words // 2. A 2-to-2 paraphrase
    ties with the exact word inside it and, after both chunks close, wins as the partial
    ranked first at the reference's last word; a one-to-one stem earns nothing and loses."""
    exact = _candidate(0, 0, 1, 1, EXACT)
    paraphrase = (0, (PARAPHRASE, 0, 2, 0, 0, 2), 0, 2, 2, PARAPHRASE)
    assert align(2, 2, [exact, paraphrase]) == [Match(0, 2, 0, 2, PARAPHRASE)]
    assert align(2, 2, [exact, _candidate(0, 1, 1, 1, STEM)]) == [Match(0, 1, 0, 1, EXACT)]


def test_alignment_adds_a_branch_distance_to_its_parent():
    """Reference "y a", candidate "a a": the second branch inherits the first's distance
    (|1 - 0|), so the first occurrence wins although the second sits at the same position."""
    found = [_candidate(1, 0, 1, 1, EXACT), _candidate(1, 1, 1, 1, EXACT)]
    assert align(2, 2, found) == [Match(0, 1, 1, 1, EXACT)]


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


def test_skipping_references_by_their_score_bound_changes_no_statistic(meteor, shared_data):
    """Java-free. The bound is never below a reference's score, and the statistics equal
    those of aligning every reference and keeping the first best one."""
    rows = json.loads((shared_data / GOLDEN_FILE).read_text())["rows"][1::9]
    tokenized = ptb_tokenize(
        {**{("ref", r["key"]): r["references"] for r in rows},
         **{("res", r["key"]): [r["candidate"]] for r in rows}}
    )  # fmt: skip
    gts = {r["key"]: tokenized[("ref", r["key"])] for r in rows}
    res = {r["key"]: tokenized[("res", r["key"])] for r in rows}
    texts = {*(c for (c,) in res.values()), *(t for refs in gts.values() for t in refs)}
    sentences, reach = meteor._sentences(texts)
    exhaustive = []
    for key, refs in gts.items():
        test = sentences[res[key][0]]
        best, best_score = None, -1.0
        for ref in (sentences[r] for r in refs):
            found = candidates(test, ref, reach)
            stats = statistics(test, ref, align(len(test.words), len(ref.words), list(found)))
            tight = score_bound(test, ref, found, longest_chunk(found))
            assert meteor_from_stats(stats) <= tight <= score_bound(test, ref, found), key
            if meteor_from_stats(stats) > best_score:
                best, best_score = stats, meteor_from_stats(stats)
        exhaustive.append(best)
    assert meteor.statistics(gts, res) == exhaustive


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
    ids = index.ids(resources.phrase_hashes(["big", "large", "a big dog", "absent"]))
    assert ids[3] == -1 and min(ids[:3]) >= 0
    sources, targets, _ = index.links(ids[:3])
    big, large = int(ids[0]), int(ids[1])
    assert set(zip(sources.tolist(), targets.tolist(), strict=True)) == {(big, large), (large, big)}
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


@pytest.fixture
def fresh_pool(monkeypatch):
    """A pool of METEOR workers for one test, shared by calls of 8 captions or more."""
    pool = workers.Pool()
    monkeypatch.setattr(workers, "POOL", pool)
    monkeypatch.setattr(scorer_module, "SHARE_MIN_CAPTIONS", 8)
    yield pool
    pool.close()


def _golden_sample(shared_data, step: int) -> tuple[dict, dict]:
    rows = json.loads((shared_data / GOLDEN_FILE).read_text())["rows"][::step]
    gts = {row["key"]: row["references"] for row in rows}
    return gts, {row["key"]: [row["candidate"]] for row in rows}


def test_worker_processes_give_the_statistics_of_one_process(meteor, fresh_pool, shared_data):
    gts, res = _golden_sample(shared_data, 60)  # 95 captions
    alone = Meteor(processes=1).statistics(gts, res)
    assert Meteor(processes=3).statistics(gts, res) == alone
    assert len(fresh_pool._workers) == 2  # started, and kept for the next call
    pending = Meteor(processes=2).start(gts, res)  # the worker's part is under way
    assert Meteor(processes=2).statistics(gts, res) == alone  # busy pool: all here
    assert pending() == alone


def test_a_failed_worker_is_reported_once_and_its_part_scored_here(
    meteor, fresh_pool, shared_data, capfd
):
    gts, res = _golden_sample(shared_data, 60)
    alone = Meteor(processes=1).statistics(gts, res)
    two = Meteor(processes=2)
    assert two.statistics(gts, res) == alone
    fresh_pool._workers[0]._process.kill()
    fresh_pool._workers[0]._process.wait()
    assert two.statistics(gts, res) == alone
    assert two.statistics(gts, res) == alone
    assert capfd.readouterr().err.count("METEOR worker failed, scoring in this process") == 1
    assert not fresh_pool._workers  # closed; later calls stay in this process


def test_the_environment_sets_the_processes_and_one_keeps_every_caption_here(
    meteor, fresh_pool, shared_data, monkeypatch
):
    gts, res = _golden_sample(shared_data, 60)
    monkeypatch.setenv(scorer_module.PROCESSES_VARIABLE, "1")
    assert Meteor().statistics(gts, res) == Meteor(processes=2).statistics(gts, res)
    assert len(fresh_pool._workers) == 1  # only the explicit processes=2 started one
    for wrong in ("x", "0"):
        monkeypatch.setenv(scorer_module.PROCESSES_VARIABLE, wrong)
        with pytest.raises(ValueError, match=f"CAPSIM_METEOR_PROCESSES must be .* got '{wrong}'"):
            Meteor()


def test_a_forked_child_leaves_its_parents_workers_alone(meteor, fresh_pool, shared_data):
    """After a fork the child forgets the pool's workers (os.register_at_fork): it must not
    write to their pipes, nor close them; its next call starts a worker of its own."""
    gts, res = _golden_sample(shared_data, 60)
    alone = Meteor(processes=1).statistics(gts, res)
    assert Meteor(processes=2).statistics(gts, res) == alone
    inherited = fresh_pool._workers[0]
    fresh_pool._forget()  # what the child runs after a fork
    assert Meteor(processes=2).statistics(gts, res) == alone
    assert fresh_pool._workers[0] is not inherited
    assert inherited._process.poll() is None  # still running, for the parent
    inherited.close()
