"""vtfn_jax.SentenceEncoder and python -m vtfn_jax.evaluate on tiny trained runs.

One shapes-world VTFN run (demo_bow, runlocal) serves most tests; a few steps
of PinModelA and word2vec check that baselines load the same way.
"""

from __future__ import annotations

import importlib
import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import requires_gensim
from scipy import stats

from capsim import text
from capsim import workdir as capsim_workdir
from capsim.data.sts import read_sts_tsv
from capsim.errors import CaptionError, CheckpointError
from capsim.eval.evaluators import Evaluators
from capsim.eval.evaluators.base import Subject
from capsim.eval.evaluators.sts import SickR, StsBenchmark
from configs import demo_bow
from vtfn_jax import SentenceEncoder, evaluate, train

REPO = Path(__file__).resolve().parents[1]
STS_FIXTURES = REPO / "tests" / "fixtures" / "sts"
SENTENCES = [
    "a red square",
    "two big green triangles at the left side",
    "a trio of purple hoops near the top together with a lone cyan disc on the right",
    "",
    "photo showing a qqxzv next to a crimson zzvqx",
    "   ",
    " ".join(["three small yellow circles and"] * 20) + " one blue box",  # 121 tokens
    "A  RED Square ",
]
# Hand-made graded pairs in the shapes world's words, for the SICK-R and STS-B files.
PAIRS = [
    ("a red square", "a red square", 5.0),
    ("a red square on the left", "one red square at the left side", 4.6),
    ("two green triangles", "a pair of green triangles", 4.1),
    ("a big blue circle", "a small blue ring", 3.2),
    ("three yellow crosses", "three purple crosses", 2.5),
    ("a violet box near the top", "two orange sticks at the bottom", 1.1),
    ("a trio of white discs", "one crimson wedge", 0.4),
]


def bow_workdir(root: Path) -> Path:
    workdir = root / "bow"
    train.train_and_evaluate(demo_bow.get_config("runlocal"), workdir)
    return workdir


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A trained demo_bow workdir (read it; copy it to change it)."""
    return bow_workdir(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def encoder(run) -> SentenceEncoder:
    return SentenceEncoder.from_checkpoint(run)


def direct(encoder: SentenceEncoder, sentence: str) -> np.ndarray:
    """The text tower on one unpadded ``<S> w1 .. wn </S>`` row, outside every batching path."""
    ids = [text.BOS_ID, *encoder.embedder.vocab.lookup(text.tokenize(sentence)), text.EOS_ID]
    row = jnp.asarray([ids], jnp.int32)
    return np.asarray(encoder.embedder.module.embed_text(row, jnp.ones(row.shape, bool)))[0]


# ---------------------------------------------------------------- encode


def test_encode_returns_rows_like_sentence_transformers(encoder):
    vectors = encoder.encode(SENTENCES)
    assert isinstance(vectors, np.ndarray) and vectors.shape == (len(SENTENCES), 128)
    single = encoder.encode(SENTENCES[2])
    assert single.shape == (128,)
    np.testing.assert_allclose(single, vectors[2], atol=1e-6)
    np.testing.assert_allclose(vectors[0], vectors[7], atol=1e-6)  # case and spacing fold
    for row in (0, 1, 2, 4, 6):
        np.testing.assert_allclose(vectors[row], direct(encoder, SENTENCES[row]), atol=1e-5)
    assert encoder.encode([]).shape == (0, 128)


def test_vectors_do_not_depend_on_batch_size_or_neighbours(encoder):
    sentences = SENTENCES * 12  # 96 sentences: more than one chunk at batch_size 1
    reference = encoder.encode(sentences, batch_size=64)
    for batch_size in (1, 3, 8, 256):
        np.testing.assert_allclose(
            encoder.encode(sentences, batch_size=batch_size), reference, atol=1e-6
        )
    alone = np.stack([encoder.encode(s, batch_size=1) for s in SENTENCES])
    np.testing.assert_allclose(alone, reference[: len(SENTENCES)], atol=1e-6)


def test_normalize_embeddings_gives_unit_rows_and_keeps_zero_rows(encoder):
    raw = encoder.encode(SENTENCES)
    unit = encoder.encode(SENTENCES, normalize_embeddings=True)
    norms = np.linalg.norm(unit, axis=1)
    empty = [3, 5]
    np.testing.assert_allclose(np.delete(norms, empty), 1.0, atol=1e-6)
    assert not np.any(unit[empty])
    np.testing.assert_allclose(unit[0], raw[0] / np.linalg.norm(raw[0]), atol=1e-6)


def test_empty_sentences_get_zero_vectors_and_a_logged_count(encoder, caplog):
    with caplog.at_level(logging.INFO, logger="vtfn_jax.embedders"):
        vectors = encoder.encode(["", "a red square", " \t "])
    assert not np.any(vectors[[0, 2]]) and np.any(vectors[1])
    assert "2 of 3 sentences are empty" in caplog.text
    assert not np.any(encoder.encode(["", ""]))


def test_unknown_words_go_through_unk(encoder):
    vectors = encoder.encode(["a qqxzv square", "a zzvqx square", "a <unk> square"])
    np.testing.assert_allclose(vectors[0], vectors[1], atol=1e-6)
    ids = [text.BOS_ID, 4, text.UNK_ID, encoder.embedder.vocab.stoi["square"], text.EOS_ID]
    row = jnp.asarray([ids], jnp.int32)
    unk = np.asarray(encoder.embedder.module.embed_text(row, jnp.ones(row.shape, bool)))[0]
    np.testing.assert_allclose(vectors[0], unk, atol=1e-5)


def test_bad_input_is_refused(encoder):
    with pytest.raises(CaptionError, match="caption 1: must be a string, got int"):
        encoder.encode(["a red square", 7])
    with pytest.raises(ValueError, match="batch_size"):
        encoder.encode(["a red square"], batch_size=0)


def test_progress_lines_when_asked(encoder, capsys):
    encoder.encode(SENTENCES * 20, batch_size=1, show_progress_bar=True)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3 and lines[-1].startswith("encode: sentences 160/160")
    encoder.encode(SENTENCES, show_progress_bar=None)  # INFO is off: no progress
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- loading


def test_loading_reads_no_captions_or_features(run, encoder, monkeypatch, tmp_path):
    def no_data(config):
        raise AssertionError("loading rebuilt the run's data")

    monkeypatch.setattr(train, "prepare_data", no_data)
    light = SentenceEncoder.from_checkpoint(run)
    np.testing.assert_array_equal(light.encode(SENTENCES), encoder.encode(SENTENCES))
    assert light.config.model.kind == "vtfn" and light.embed_images is not None
    monkeypatch.undo()
    # A workdir from before data.json rebuilds its data once, to the same model.
    old = shutil.copytree(run, tmp_path / "old")
    (old / capsim_workdir.DATA_FILE).unlink()
    rebuilt = SentenceEncoder.from_checkpoint(old)
    np.testing.assert_array_equal(rebuilt.encode(SENTENCES), encoder.encode(SENTENCES))


def damage(workdir: Path, what: str) -> None:
    if what == "config":
        (workdir / "config.json").write_text("{not json")
    elif what == "vocab":
        (workdir / capsim_workdir.VOCAB_FILE).unlink()
    elif what == "kind":
        config = json.loads((workdir / "config.json").read_text())
        config["model"]["kind"] = "bert"
        (workdir / "config.json").write_text(json.dumps(config))
    elif what == "checkpoints":
        shutil.rmtree(workdir / "checkpoints")
    elif what == "weights":
        for path in (workdir / "checkpoints").glob("*/model/**/*"):
            if path.is_file():
                path.write_bytes(b"garbage")


@pytest.mark.parametrize("what", ["config", "vocab", "kind", "checkpoints", "weights"])
def test_a_damaged_workdir_is_a_checkpoint_error_naming_it(run, tmp_path, what):
    workdir = shutil.copytree(run, tmp_path / "damaged")
    damage(workdir, what)
    with pytest.raises(CheckpointError, match=str(workdir)):
        SentenceEncoder.from_checkpoint(workdir)


def test_a_missing_workdir_is_a_checkpoint_error(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        SentenceEncoder.from_checkpoint(tmp_path / "nowhere")


def small_baseline(kind: str, root: Path, **model):
    config_file = importlib.import_module(f"configs.baseline_{kind}")
    config = config_file.get_config("runlocal,source=shapes_world")
    config.model.update(model)
    config.num_steps = 2
    for name in ("same_diff", "retrieval", "shapes"):
        del config.evals[name]
    train.train_and_evaluate(config, root / kind)
    return config, root / kind


@pytest.mark.parametrize(
    ("kind", "model"),
    [
        ("pin_model_a", dict(dim=16, embed_dim=16)),  # rebuilt with its image size from data.json
        pytest.param("word2vec", dict(dim=16), marks=requires_gensim),
    ],
)
def test_baselines_load_the_same_way(kind, model, tmp_path):
    config, workdir = small_baseline(kind, tmp_path, **model)
    encoder = SentenceEncoder.from_checkpoint(workdir)
    assert encoder.embed_images is None
    _, embedder, _ = evaluate.load_trained(config, workdir)
    short = SENTENCES[:6]  # the long one's buckets cost a GRU many compilations
    vectors = encoder.encode(short, batch_size=3)
    np.testing.assert_allclose(vectors, embedder.embed(short, batch_size=64), atol=1e-6)
    assert vectors.shape == (len(short), 16) and not np.any(vectors[[3, 5]])


# ---------------------------------------------------------------- SICK-R and STS-B evaluators


def write_pair_files(root: Path) -> Path:
    """A data_dir with sts/ (the mini fixture), sick/ and stsbenchmark/ in the README's layout."""
    shutil.copytree(STS_FIXTURES / "mini", root / "sts")
    (root / "sick").mkdir()
    header = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"
    rows = [f"{i}\t{a}\t{b}\t{s}\tNEUTRAL" for i, (a, b, s) in enumerate(PAIRS)]
    (root / "sick" / "SICK_test_annotated.txt").write_text("\n".join([header, *rows]) + "\n")
    (root / "stsbenchmark").mkdir()
    rows = [
        f"main-captions\tMSRvid\t2012test\t{i:04d}\t{s}\t{a}\t{b}"
        for i, (a, b, s) in enumerate(PAIRS)
    ]
    (root / "stsbenchmark" / "sts-test.csv").write_text("\n".join(rows) + "\n")
    return root


# How many float32 ulps a cosine may move between two processes. The vectors are
# float32 and XLA picks its kernels by shape: the CLI embeds a pair's two sentences in
# one batch of its own size, the reference embeds each side apart, so a dot product or a
# norm can round differently (by an ulp or two) on a CPU where the kernels differ.
COSINE_ULPS = 4


def scipy_reference(encoder: SentenceEncoder, pairs) -> tuple[dict, float]:
    """SciPy's Pearson and Spearman x100 of the pairs' cosines, and how far the Pearson
    may move when each cosine moves by COSINE_ULPS ulps (pearson_x100_tolerance)."""
    first = encoder.encode([a for a, _, _ in pairs])
    second = encoder.encode([b for _, b, _ in pairs])
    cosine = np.sum(first * second, axis=1) / (
        np.linalg.norm(first, axis=1) * np.linalg.norm(second, axis=1)
    )
    gold = np.asarray([s for _, _, s in pairs])
    reference = {
        "pearson": 100 * stats.pearsonr(cosine, gold).statistic,
        "spearman": 100 * stats.spearmanr(cosine, gold).statistic,
        "n": len(pairs),
    }
    return reference, pearson_x100_tolerance(cosine, gold)


def pearson_x100_tolerance(cosine: np.ndarray, gold: np.ndarray) -> float:
    """First-order bound on Pearson x100's change when every cosine moves by COSINE_ULPS
    ulps: sum_i |dr/dx_i| * step, with dr/dx_i = (zg_i - r zx_i) / (n std(x)).

    Close cosines amplify: STS16 alpha's four (std 0.035) move r by 27 times their
    own change, so one ulp (6e-8) of one cosine moves Pearson x100 by up to 1.6e-4.
    """
    x = cosine.astype(np.float64)
    zx, zg = (x - x.mean()) / x.std(), (gold - gold.mean()) / gold.std()
    r = np.mean(zx * zg)
    slope = np.abs((zg - r * zx) / (len(x) * x.std())).sum()
    step = COSINE_ULPS * float(np.spacing(np.float32(np.abs(x).max())))
    return 100 * slope * step


def assert_same_correlations(got: dict, reference: tuple[dict, float]) -> None:
    want, tolerance = reference
    assert got["n"] == want["n"]
    assert got["pearson"] == pytest.approx(want["pearson"], abs=tolerance)
    assert got["spearman"] == pytest.approx(want["spearman"], abs=1e-9)  # ranks: exact


def test_sick_scores_only_the_test_part_of_the_full_file(encoder, caplog):
    subject = Subject(embed=encoder.encode)
    result = SickR(str(STS_FIXTURES / "SICK.txt"))(subject)
    assert result["n"] == 2  # the TEST pairs
    assert SickR(str(STS_FIXTURES / "SICK.txt"), semeval_set="")(subject)["n"] == 3
    assert SickR(str(STS_FIXTURES / "SICK_test_annotated.txt"))(subject)["n"] == 2
    assert StsBenchmark(str(STS_FIXTURES), split="dev")(subject)["n"] == 3
    with caplog.at_level(logging.WARNING):
        assert StsBenchmark(str(STS_FIXTURES))(subject) is None  # no sts-test.csv
    assert "sts-test.csv is not a file" in caplog.text


def test_text_only_evaluators_are_known():
    evaluators = Evaluators(
        dict(
            sts=dict(type="sts", sts_dir="x"),
            sick=dict(type="sick", path="x"),
            stsb=dict(type="stsb", stsb_dir="x"),
            same_diff=dict(type="same_diff", split="test"),
        )
    )
    assert evaluators.text_only(["sts", "sick", "stsb"])
    assert not evaluators.text_only()
    with pytest.raises(KeyError, match="unknown evaluations"):
        evaluators.text_only(["sickr"])


# ---------------------------------------------------------------- python -m vtfn_jax.evaluate


def test_evaluate_cli_matches_scipy_and_the_training_report(run, encoder, tmp_path):
    workdir = shutil.copytree(run, tmp_path / "run")
    data_dir = write_pair_files(tmp_path / "data")
    tasks = "sts,sick,stsb,same_diff,retrieval"
    command = [sys.executable, "-m", "vtfn_jax.evaluate", "--workdir", str(workdir)]
    done = subprocess.run(
        [*command, "--tasks", tasks, "--data_dir", str(data_dir)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "| sick | pearson |" in done.stdout
    results = json.loads((workdir / "eval.json").read_text())
    assert set(results) == {"feature_source", *tasks.split(",")}
    # Another process, other batches: equal up to float32 rounding of the cosines.
    reference = scipy_reference(encoder, PAIRS)
    assert_same_correlations(results["sick"], reference)
    assert_same_correlations(results["stsb"], reference)
    alpha = read_sts_tsv(STS_FIXTURES / "mini" / "2016" / "alpha.test.tsv", "STS16")
    alpha_pairs = list(zip(alpha.sentences_a, alpha.sentences_b, alpha.scores, strict=True))
    alpha_reference = scipy_reference(encoder, alpha_pairs)
    assert alpha_reference[1] > 1e-4  # the fixed 1e-4 that failed was tighter than this
    assert_same_correlations(results["sts"]["STS16"]["subsets"]["alpha"], alpha_reference)
    trained = json.loads((run / "results.json").read_text())
    assert results["same_diff"] == pytest.approx(trained["same_diff"], abs=1e-6)
    assert results["retrieval"] == pytest.approx(trained["retrieval"], abs=1e-6)


def test_evaluate_cli_names_a_missing_workdir(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["evaluate", f"--workdir={tmp_path / 'nowhere'}"])
    with pytest.raises(SystemExit) as exit_info:
        evaluate.cli()
    message = f"vtfn_jax.evaluate: error: workdir {tmp_path / 'nowhere'} does not exist"
    assert exit_info.value.code == message


def test_evaluate_text_tasks_from_flags_without_the_run_data(run, encoder, tmp_path, monkeypatch):
    workdir = shutil.copytree(run, tmp_path / "run")
    monkeypatch.setattr(train, "prepare_data", lambda config: pytest.fail("data rebuilt"))
    args = evaluate.parse_args(
        [
            f"--workdir={workdir}",
            f"--sts_dir={STS_FIXTURES / 'mini'}",
            f"--sick_path={STS_FIXTURES / 'SICK.txt'}",
            f"--stsb_dir={STS_FIXTURES}",
            "--stsb_split=dev",
            "--tasks=sts,sick,stsb",
        ]
    )
    results = evaluate.evaluate(args)
    assert results["sick"]["n"] == 2 and results["stsb"]["n"] == 3
    assert set(results["sts"]) == {"STS12", "STS16", "avg2016"}
    # Named paths join the config's own final report (which needs the run's data).
    monkeypatch.undo()
    args.tasks = None
    results = evaluate.evaluate(args)
    assert set(results) == {
        "feature_source",
        "same_diff",
        "retrieval",
        "shapes",
        "sts",
        "sick",
        "stsb",
    }
