"""The packaged I2CE models: load, score every real oddity, checksums, rebuild, CLI."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import jax
import numpy as np
import pytest
from conftest import requires_glove
from flax import nnx

from capsim.embed import bucket_length
from capsim.errors import CaptionError, CheckpointError, DataFormatError
from i2ce_jax import pretrained, rebuild_pretrained
from i2ce_jax import score as score_cli
from i2ce_jax.scorer import I2CEScorer

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
MODEL_CARD = REPO / "i2ce_jax" / "pretrained" / "MODEL_CARD.md"
MAX_PACKAGE_BYTES = 40_000_000  # every packaged model together

REFERENCES = [
    "a brown dog runs across the green grass",
    "a dog running on a lawn",
    "the dog is playing outside in a field",
    "a small dog jumps over the grass",
    "a puppy runs in the park",
]
LONG_CAPTION = " ".join(["a dog runs on the grass and"] * 21)  # 147 words + ids > 128 tokens
ODDITIES = {
    "long": LONG_CAPTION,
    "all_oov": "zzyzx qwertyuiop xylograph",
    "single_word": "tvs",
    "emoji": "a dog 🐕 running on grass 🌿",
    "non_ascii": "un chien brun court sur l'herbe — café",
    "html": "a dog &amp; a cat on the &quot;grass&quot; <br>",
    "upper": "A BROWN DOG RUNS ACROSS THE GREEN GRASS",
    "punct": "a dog!!!!! running???? on grass......",
    "identical": REFERENCES[0],
    "empty": "",
    "whitespace": "  \t\n ",
}


def training_sources(meta: dict) -> list[str]:
    """The caption sources a packaged model was trained on, read from its encoder.json config."""
    data = meta["config"]["data"]
    if data.get("sources"):
        return list(data["sources"])
    return ["coco", *(["flickr8k"] if data.get("flickr8k_dir") else [])]


@pytest.fixture(scope="module")
def scorer():
    return I2CEScorer.pretrained()


def test_packaged_models_are_small_and_load_fast():
    total = 0
    for name in pretrained.NAMES:
        folder = pretrained.PACKAGE_DIR / name
        total += sum(p.stat().st_size for p in folder.iterdir())
        start = time.perf_counter()
        _, vocab, meta = pretrained.load(name)
        assert time.perf_counter() - start < 2.0
        assert len(vocab) == meta["vocab_size"]
    assert total < MAX_PACKAGE_BYTES


def test_a_loaded_encoder_has_no_abstract_state():
    """Abstract leaves (the dropout keys of a model built by nnx.eval_shape) would send every
    batch of the scorer through JAX's slow dispatch path."""
    encoder, _, _ = pretrained.load()
    leaves = jax.tree.leaves(nnx.state(encoder))
    assert leaves and all(isinstance(leaf, jax.Array) for leaf in leaves)


def test_only_the_research_model_carries_flickr_text():
    for name in pretrained.NAMES:
        sources = training_sources(pretrained.load(name)[2])
        flickr = [s for s in sources if s.startswith("flickr")]
        assert bool(flickr) == (name in pretrained.RESEARCH_ONLY), (name, sources)
        assert "coco" in sources
    assert pretrained.DEFAULT not in pretrained.RESEARCH_ONLY
    card = (pretrained.PACKAGE_DIR / "research" / "MODEL_CARD.md").read_text()
    assert "non-commercial" in "\n".join(card.splitlines()[:5])


def test_no_packaged_model_trained_on_the_karpathy_test_split():
    # Trained with the guard on: the Karpathy COCO test images' captions were dropped.
    for name in pretrained.NAMES:
        data = pretrained.load(name)[2]["config"]["data"]
        assert data.get("keep_karpathy_test") is False, (name, data)
        assert "test" not in data.get("karpathy_splits", ()), name


def test_checksums_match_the_model_card():
    card = MODEL_CARD.read_text()
    for name in pretrained.NAMES:
        digest = pretrained.sha256(pretrained.PACKAGE_DIR / name / pretrained.WEIGHTS_FILE)
        assert re.search(rf"`{name}`.*{digest}", card), f"{name}: {digest} not in the card"


def test_every_oddity_gets_a_finite_score(scorer):
    gts = {key: REFERENCES for key in ODDITIES}
    res = {key: [caption] for key, caption in ODDITIES.items()}
    result = scorer.score(gts, res)
    scores = dict(zip(result.ids, result.scores, strict=True))
    assert np.all(np.isfinite(result.scores))
    assert bucket_length(len(LONG_CAPTION.split()) + 2) > 128
    assert result.similarities[list(res).index("identical"), 0] == pytest.approx(1.0, abs=1e-6)
    assert scores["empty"] == 0.0 and scores["whitespace"] == 0.0
    assert result.empty_candidates == ["empty", "whitespace"]
    assert scores["upper"] == pytest.approx(scores["identical"], abs=1e-6)  # lower-cased
    assert scores["identical"] > scores["all_oov"]
    assert scores["identical"] > scores["single_word"]


def test_identical_candidate_scores_one_with_top_1():
    top1 = I2CEScorer.pretrained(pooling="top-1")
    _, scores = top1.compute_score({"a": REFERENCES}, {"a": [REFERENCES[2]]})
    assert scores[0] == pytest.approx(1.0, abs=1e-6)


def test_scores_do_not_depend_on_other_captions_or_batch_size(scorer):
    gts = {key: REFERENCES for key in ODDITIES}
    res = {key: [caption] for key, caption in ODDITIES.items()}
    _, together = scorer.compute_score(gts, res)
    alone = [scorer.compute_score({k: gts[k]}, {k: res[k]})[1][0] for k in res]
    _, small = I2CEScorer.pretrained(batch_size=8).compute_score(gts, res)
    np.testing.assert_allclose(together, alone, atol=1e-6)
    np.testing.assert_allclose(together, small, atol=1e-6)


def test_related_caption_beats_unrelated(scorer):
    gts = {"good": REFERENCES, "bad": REFERENCES}
    res = {"good": ["a dog runs on the grass"], "bad": ["a man slices a pizza in a kitchen"]}
    _, scores = scorer.compute_score(gts, res)
    assert scores[0] > scores[1] + 0.2


def test_corrupt_package_folder_is_an_error(tmp_path):
    source = pretrained.PACKAGE_DIR / pretrained.DEFAULT
    for name in (pretrained.VOCAB_FILE, pretrained.META_FILE):
        (tmp_path / name).write_bytes((source / name).read_bytes())
    with pytest.raises(CheckpointError, match=r"no encoder\.npz"):
        pretrained.load(tmp_path)
    (tmp_path / pretrained.WEIGHTS_FILE).write_bytes(b"not a zip file")
    with pytest.raises(CheckpointError, match="unreadable"):
        pretrained.load(tmp_path)


def _write(path: Path, payload) -> Path:
    path.write_text(json.dumps(payload, ensure_ascii=False), encoding="utf-8")
    return path


def test_cli_without_checkpoint_scores_every_oddity(tmp_path):
    refs = _write(tmp_path / "refs.json", {"img": REFERENCES})
    cands = _write(
        tmp_path / "cands.json", [{"image_id": "img", "caption": c} for c in ODDITIES.values()]
    )
    out = tmp_path / "scores.json"
    assert score_cli.main(["--refs", str(refs), "--cands", str(cands), "--out", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["model"] == "base"
    assert written["version"] == "I2CE base, scorer 2" and written["scorer"] == 2
    assert len(written["scores"]) == len(ODDITIES)
    assert all(np.isfinite(row["score"]) for row in written["scores"])
    empty_at = [list(ODDITIES).index("empty"), list(ODDITIES).index("whitespace")]
    assert written["empty_candidates"] == 2
    assert written["empty_candidate_indices"] == empty_at
    assert all(written["scores"][i]["score"] == 0.0 for i in empty_at)


@pytest.mark.parametrize(
    ("refs", "cands", "error", "match"),
    [
        ({"img": ["a dog"]}, b"[{", DataFormatError, r"cands.json:1.*malformed JSON"),
        ({"img": ["a dog"]}, [{"image_id": "other", "caption": "x"}], CaptionError, "'other'"),
        ({"img": []}, [{"image_id": "img", "caption": "x"}], DataFormatError, r"refs.json.*'img'"),
        (
            {"img": ["  "]},
            [{"image_id": "img", "caption": "x"}],
            DataFormatError,
            r"refs.json.*empty",
        ),
        (
            {"img": ["a dog"]},
            [{"image_id": "img", "caption": 3}],
            DataFormatError,
            "entry 0.*string",
        ),
        (
            {"img": ["a dog"]},
            b'[{"image_id": "img", "caption": "caf\xe9"}]',
            DataFormatError,
            "UTF-8",
        ),
    ],
)
def test_cli_bad_files_are_errors_and_write_nothing(tmp_path, refs, cands, error, match):
    refs_file = _write(tmp_path / "refs.json", refs)
    cands_file = tmp_path / "cands.json"
    if isinstance(cands, bytes):
        cands_file.write_bytes(cands)
    else:
        _write(cands_file, cands)
    out = tmp_path / "scores.json"
    out.write_text("previous\n")
    with pytest.raises(error, match=match):
        score_cli.main(["--refs", str(refs_file), "--cands", str(cands_file), "--out", str(out)])
    assert out.read_text() == "previous\n"


def test_scoring_input_errors_name_the_id(scorer):
    with pytest.raises(CaptionError, match=r"'x'.*no references"):
        scorer.compute_score({"a": REFERENCES}, {"x": ["a dog"]})


def check_rebuilt(out: Path, bidirectional: bool) -> None:
    """A rebuilt model: its text sources and settings, loaded as one, and it scores."""
    encoder, vocab, meta = pretrained.load(out)
    assert training_sources(meta) == ["coco", "coco_lines", "coco_extra"]
    assert meta["loss"] == "infonce" and meta["embed_dim"] == 50  # GloVe 6B 50-d
    assert meta["bidirectional"] is bidirectional
    assert (encoder.backward_cell is not None) is bidirectional
    scorer = I2CEScorer(encoder, vocab)
    _, scores = scorer.compute_score({"a": REFERENCES}, {"a": ["a dog on grass"]})
    assert np.isfinite(scores[0])


# A training run at the runlocal size over GloVe's 400k words (40 s): the fast tier
# rebuilds the unidirectional model once, from the installed wheel (test_wheel.py).
@pytest.mark.slow
@pytest.mark.skipif(
    not (DATA / "extra_captions").is_dir(), reason="needs ../shared/data with extra_captions/"
)
@requires_glove
@pytest.mark.parametrize("bidirectional", [False, True])
def test_rebuild_command_runs_at_runlocal_size(tmp_path, bidirectional):
    """Train, export, load and score; a bidirectional GRU comes back as one."""
    out = tmp_path / "model"
    rebuild_pretrained.main(
        [
            "--name",
            "base",
            "--data_dir",
            str(DATA),
            "--workdir",
            str(tmp_path / "work"),
            "--out",
            str(out),
            "--config_arg",
            f"runlocal,bidir={bidirectional}",
        ]
    )
    check_rebuilt(out, bidirectional)


def test_rebuild_refuses_to_start_until_told_where_the_model_goes(capsys):
    """Without ``--out`` or ``--into_package`` the command exits before any training: the
    shipped weights are overwritten only when asked for, and never by both at once."""
    with pytest.raises(SystemExit) as refused:
        rebuild_pretrained.main([])
    assert refused.value.code == 2
    assert "one of the arguments --out --into_package is required" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        rebuild_pretrained.parse_args(["--out", "model", "--into_package"])
    assert rebuild_pretrained.parse_args(["--into_package"]).into_package
    assert rebuild_pretrained.parse_args(["--out", "model"]).out == "model"


def test_cli_research_model_is_asked_for_by_name_and_states_its_terms(tmp_path, capsys):
    refs = _write(tmp_path / "refs.json", {"img": REFERENCES})
    cands = _write(tmp_path / "cands.json", [{"image_id": "img", "caption": "a dog on grass"}])
    out = tmp_path / "scores.json"
    args = ["--refs", str(refs), "--cands", str(cands), "--out", str(out)]
    assert score_cli.main([*args, "--model", "research"]) == 0
    assert json.loads(out.read_text())["model"] == "research"
    assert "non-commercial" in capsys.readouterr().err
    assert score_cli.main(args) == 0  # no --model: the permissive default, without the note
    assert json.loads(out.read_text())["model"] == pretrained.DEFAULT
    assert "non-commercial" not in capsys.readouterr().err
