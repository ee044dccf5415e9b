"""capsim's COCOEvalCap against pycocoevalcap's on the same COCO-format files of real captions."""

from __future__ import annotations

import json
import math
import types
from pathlib import Path

import numpy as np
import pytest

from capsim.metrics import cocoeval
from capsim.metrics.coco_metrics import meteor_available
from capsim.metrics.cocoeval import Unavailable
from i2ce_jax import cocoeval as i2ce_cocoeval
from i2ce_jax.cocoeval import COCOEvalCap

SHARED_KEYS = ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "ROUGE_L", "CIDEr")
NUM_IMAGES = 60
REFERENCES = 4
# Results that meet the PTB tokenizer's and METEOR's edge cases, some in pairs whose second
# caption starts a sentence after the first's initial ("bulb A." then "The ...").
EDGE_RESULTS = [
    "A bus on Library Way and Madison Ave.",
    "his/her 1/2 mile, 1 1/2 cups (816) 234-7743 and U.S.-led e.g. ;)",
    "a man's café—naïve “quoted” at 5:30pm for $5.99... can't!!",
    "a lamp post and a bulb A.",
    "The dog cannot gonna run 'til the '90s #p2 @user www.google.com",
    "A cat sitting on a Dr. Smith's 6.0-magnitude (a) [b] {c} ½ I.",
    "It is 3.5 fig. 3 no.5 Inc.N x...y a.. Ph.D.",
]


def write_files(shared_data: Path, folder: Path, count: int = NUM_IMAGES) -> tuple[Path, Path]:
    """References: 4 captions of each of ``count`` val2017 images; results: the image's
    fifth caption, or another image's, a shouted one, punctuation only, an empty one and
    EDGE_RESULTS."""
    payload = json.loads((shared_data / "coco" / "captions_val2017.json").read_text())
    by_image: dict[int, list[dict]] = {}
    for annotation in payload["annotations"]:
        by_image.setdefault(annotation["image_id"], []).append(annotation)
    images = sorted(i for i, anns in by_image.items() if len(anns) > REFERENCES)[:count]
    annotations, results = [], []
    for k, image in enumerate(images):
        captions = by_image[image]
        annotations += captions[:REFERENCES]
        caption = captions[REFERENCES]["caption"]
        if k % 7 == 3:
            caption = by_image[images[k - 1]][0]["caption"]
        results.append({"image_id": image, "caption": caption})
    results[0]["caption"] = ""
    results[1]["caption"] = " ... !"
    results[2]["caption"] = results[2]["caption"].upper()
    for result, edge in zip(results[3:], EDGE_RESULTS, strict=False):
        result["caption"] = edge
    annotation_file = folder / "captions.json"
    annotation_file.write_text(
        json.dumps(
            {
                "images": [{"id": i} for i in images],
                "annotations": annotations,
                "type": "captions",
                "info": {},
                "licenses": [],
            }
        )
    )
    results_file = folder / "results.json"
    results_file.write_text(json.dumps(results))
    return annotation_file, results_file


@pytest.fixture(scope="module")
def files(shared_data, tmp_path_factory) -> tuple[Path, Path]:
    return write_files(shared_data, tmp_path_factory.mktemp("cocoeval"))


@pytest.fixture(scope="module")
def capsim_eval(files) -> COCOEvalCap:
    coco, results = cocoeval.load_files(*files)
    evaluator = COCOEvalCap(coco, results)
    evaluator.params["image_id"] = results.getImgIds()
    evaluator.evaluate(verbose=False)
    return evaluator


def _pycocoevalcap_eval(files: tuple[Path, Path], monkeypatch) -> object:
    """pycocoevalcap's own COCOEvalCap on the files, SPICE stubbed."""
    from pycocoevalcap import eval as pycoco
    from pycocotools import coco as coco_api

    class NoSpice:  # pycocoevalcap's SPICE downloads CoreNLP; every other scorer is its own
        def compute_score(self, gts, res):
            return 0.0, [0.0] * len(res)

        def method(self):
            return "SPICE"

    monkeypatch.setattr(pycoco, "Spice", NoSpice)
    coco = coco_api.COCO(str(files[0]))
    reference = pycoco.COCOEvalCap(coco, coco.loadRes(str(files[1])))
    reference.params["image_id"] = reference.cocoRes.getImgIds()
    reference.evaluate()
    return reference


def assert_every_key_equal(ours: COCOEvalCap, reference) -> None:
    """Per image and corpus, every shared key to 1e-6, in pycocoevalcap's image order."""
    for key in SHARED_KEYS:
        assert ours.eval[key] == pytest.approx(reference.eval[key], abs=1e-6), key
        differing = {
            image: (scores[key], ours.imgToEval[image][key])
            for image, scores in reference.imgToEval.items()
            if abs(ours.imgToEval[image][key] - scores[key]) > 1e-6
        }
        assert not differing, (key, differing)
    assert [e["image_id"] for e in ours.evalImgs] == [e["image_id"] for e in reference.evalImgs]


needs_the_jar = pytest.mark.skipif(
    not meteor_available(),
    reason="pycocoevalcap's side needs Java on PATH",
)


@needs_the_jar
def test_every_shared_key_equals_pycocoevalcap(files, capsim_eval, monkeypatch):
    assert_every_key_equal(capsim_eval, _pycocoevalcap_eval(files, monkeypatch))


@pytest.mark.slow
@needs_the_jar
def test_every_shared_key_equals_pycocoevalcap_on_a_thousand_images(
    shared_data, tmp_path, monkeypatch
):
    files = write_files(shared_data, tmp_path, count=1000)
    coco, results = cocoeval.load_files(*files)
    ours = COCOEvalCap(coco, results)
    ours.params["image_id"] = results.getImgIds()
    ours.evaluate(verbose=False)
    assert_every_key_equal(ours, _pycocoevalcap_eval(files, monkeypatch))


def test_i2ce_sits_beside_them_and_an_empty_caption_scores_zero(files, capsim_eval):
    empty = json.loads(files[1].read_text())[0]["image_id"]
    assert set(capsim_eval.imgToEval[empty]) >= {"image_id", *SHARED_KEYS, "I2CE"}
    for key in (*SHARED_KEYS, "I2CE"):
        assert capsim_eval.imgToEval[empty][key] == 0.0, key
    assert 0 < capsim_eval.eval["I2CE"] < 1


@pytest.mark.skipif(
    cocoeval.spice_unavailable_reason() is None, reason="SPICE can run here (CoreNLP present)"
)
def test_spice_is_never_silently_missing(capsim_eval):
    spice = capsim_eval.eval["SPICE"]
    assert isinstance(spice, Unavailable) and math.isnan(spice)
    assert "Stanford CoreNLP" in spice.reason and "get_stanford_models" in spice.reason
    assert "%s: %0.3f" % ("SPICE", spice) == "SPICE: nan"  # noqa: UP031 (pycocoevalcap's print)
    assert list(capsim_eval.eval) == [*SHARED_KEYS, "SPICE", "I2CE"]  # pycocoevalcap's order


def test_the_command_prints_the_table_and_writes_json(files, tmp_path, capsys):
    out = tmp_path / "scores.json"
    code = i2ce_cocoeval.main(
        ["--annotations", str(files[0]), "--results", str(files[1]), "--out", str(out)]
    )
    printed = capsys.readouterr().out
    assert code == 0
    report = json.loads(out.read_text())
    assert set(report["eval"]) >= {*SHARED_KEYS, "I2CE"}
    assert len(report["imgToEval"]) == NUM_IMAGES
    results = json.loads(files[1].read_text())
    empty = [results[0]["image_id"], results[1]["image_id"]]  # "" and " ... !"
    assert report["empty_candidates"] == empty
    assert f"2 empty captions scored 0 (images {empty[0]}, {empty[1]})" in printed
    for key in (*SHARED_KEYS, "I2CE"):
        assert f"| {key} | {report['eval'][key]:.4f} |" in printed


def test_a_result_for_an_unknown_image_is_refused_naming_it(files, tmp_path, capsys):
    results = [*json.loads(files[1].read_text()), {"image_id": 987654321, "caption": "a dog"}]
    bad = tmp_path / "results.json"
    bad.write_text(json.dumps(results))
    assert cocoeval.main(["--annotations", str(files[0]), "--results", str(bad)]) == 1
    assert "names image 987654321" in capsys.readouterr().err


def test_two_results_for_one_image_name_it(files):
    coco, results = cocoeval.load_files(*files)
    image = results.getImgIds()[5]
    results.imgToAnns[image].append({"image_id": image, "caption": "again"})
    evaluator = COCOEvalCap(coco, results)
    evaluator.params["image_id"] = results.getImgIds()
    with pytest.raises(cocoeval.CaptionError) as raised:
        evaluator.evaluate(verbose=False)
    message = str(raised.value)
    assert f"{image}" in message and "has 2 result captions: each image takes one result" in message
    assert "params" not in message  # the hint for images without a result does not apply


def test_a_results_file_with_two_captions_for_one_image_names_both_entries(files, tmp_path):
    results = json.loads(files[1].read_text())
    image = results[3]["image_id"]
    bad = tmp_path / "results.json"
    bad.write_text(json.dumps([*results, {"image_id": image, "caption": "again"}]))
    with pytest.raises(cocoeval.DataFormatError) as raised:
        cocoeval.load_files(files[0], bad)
    message = str(raised.value)
    assert str(bad) in message and f"second result for image {image!r} (entry 3" in message
    assert "each image takes one result" in message


def _spice_layout(root: Path, corenlp: bool) -> types.SimpleNamespace:
    """pycocoevalcap 1.2's layout (a namespace package) with its SPICE folder and, if asked,
    a stand-in CoreNLP jar; returns the spec that find_spec gives for pycocoevalcap.spice."""
    folder = root / "pycocoevalcap" / "spice"
    (folder / "lib").mkdir(parents=True)
    (folder / "spice-1.0.jar").write_bytes(b"PK")
    if corenlp:
        (folder / "lib" / cocoeval.CORENLP_JAR).write_bytes(b"PK")
    return types.SimpleNamespace(
        origin=str(folder / "__init__.py"), submodule_search_locations=[str(folder)]
    )


@pytest.mark.parametrize(
    ("installed", "java", "corenlp", "reason"),
    [
        (False, True, True, "pycocoevalcap is not installed"),
        (True, False, True, "'java' is not on PATH"),
        (True, True, False, "Stanford CoreNLP is not installed"),
        (True, True, True, None),
    ],
)
def test_spice_finds_pycocoevalcap_as_a_namespace_package(
    tmp_path, monkeypatch, installed, java, corenlp, reason
):
    spec = _spice_layout(tmp_path, corenlp)

    def find_spec(name):
        assert name == "pycocoevalcap.spice"  # never the namespace package's origin (None)
        if not installed:
            raise ModuleNotFoundError("No module named 'pycocoevalcap'")
        return spec

    monkeypatch.setattr(cocoeval.importlib.util, "find_spec", find_spec)
    monkeypatch.setattr(cocoeval.shutil, "which", lambda name: "/usr/bin/java" if java else None)
    found = cocoeval.spice_unavailable_reason()
    if reason is None:
        assert found is None
    else:
        assert found.endswith(reason) and "get_stanford_models" in found


def test_spice_values_go_into_img_to_eval_where_it_runs(files, monkeypatch):
    """With Java and CoreNLP present, pycocoevalcap's Spice runs and its per-image F-scores
    fill imgToEval (a stand-in Spice here: the real one needs CoreNLP's 1 GB)."""
    from pycocoevalcap.spice import spice as spice_module

    class StandIn:
        def compute_score(self, gts, res):
            return 0.5, [{"All": {"f": 0.25 + k / 1000}} for k in range(len(res))]

    monkeypatch.setattr(cocoeval, "spice_unavailable_reason", lambda: None)
    monkeypatch.setattr(spice_module, "Spice", StandIn)
    coco, results = cocoeval.load_files(*files)
    evaluator = cocoeval.COCOEvalCap(coco, results)
    evaluator.params["image_id"] = results.getImgIds()
    evaluator.evaluate(verbose=False)
    per_image = [evaluator.imgToEval[i]["SPICE"] for i in evaluator.params["image_id"]]
    assert per_image == pytest.approx([0.25 + k / 1000 for k in range(len(per_image))])
    assert evaluator.eval["SPICE"] == pytest.approx(np.mean(per_image))


def _shuffled_results(files, folder: Path, drop_last: bool = False) -> Path:
    """A worse system: each image gets the previous image's result caption."""
    results = json.loads(files[1].read_text())
    captions = [r["caption"] for r in results]
    shuffled = [
        {"image_id": r["image_id"], "caption": captions[k - 1]} for k, r in enumerate(results)
    ]
    path = folder / "shuffled.json"
    path.write_text(json.dumps(shuffled[:-1] if drop_last else shuffled))
    return path


def test_two_systems_get_intervals_and_paired_p_values(files, capsim_eval, tmp_path, capsys):
    """The CLI's --bootstrap report equals COCOEvalCap.bootstrap on the same evaluations."""
    other = _shuffled_results(files, tmp_path)
    out = tmp_path / "bootstrap.json"
    command = ["--annotations", str(files[0]), "--results", str(files[1])]
    command += ["--results", str(other), "--bootstrap", "200", "--seed", "4", "--out", str(out)]
    assert i2ce_cocoeval.main(command) == 0
    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert list(report["systems"]) == ["results", "shuffled"]
    for key in (*SHARED_KEYS, "I2CE"):
        cell = report["systems"]["results"][key]
        assert cell["score"] == pytest.approx(capsim_eval.eval[key], abs=1e-12)
        assert cell["ci_low"] <= cell["score"] <= cell["ci_high"]
        assert 0 < report["comparisons"]["shuffled"][key]["p_value"] <= 1
    cider = report["comparisons"]["shuffled"]["CIDEr"]
    assert cider["delta"] < 0 and cider["p_value"] < 0.05  # another image's caption is worse
    assert "shuffled against results (paired)" in printed
    coco, results = cocoeval.load_files(files[0], other)
    shuffled = COCOEvalCap(coco, results)
    shuffled.params["image_id"] = capsim_eval.params["image_id"]
    shuffled.evaluate(verbose=False)
    api = capsim_eval.bootstrap(200, seed=4, others={"shuffled": shuffled}, name="results")
    assert json.loads(json.dumps(api)) == report


def test_a_second_system_missing_an_image_is_refused_naming_it(files, tmp_path, capsys):
    other = _shuffled_results(files, tmp_path, drop_last=True)
    missing = json.loads(files[1].read_text())[-1]["image_id"]
    command = ["--annotations", str(files[0]), "--results", str(files[1])]
    assert cocoeval.main([*command, "--results", str(other), "--bootstrap", "50"]) == 1
    error = capsys.readouterr().err
    assert f"{other}: has no result for image {missing} (1 of the {NUM_IMAGES} images" in error
