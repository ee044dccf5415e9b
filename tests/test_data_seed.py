"""One seed for the data, another for training (issue 69): ``config.data.seed`` draws the
held-out images, so runs of several training seeds (``config.seed``) hold out the same
ones, and every shipped recipe draws what it drew before data.seed existed."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_caption_sources import make_data_dir, write_coco

from capsim import config_lib
from capsim.data import corpus, sources
from capsim.errors import CapsimError
from capsim.train.preflight import check_workdir
from capsim.workdir import CONFIG_FILE, upgraded
from configs import coco_bow, i2ce_coco_margin, i2ce_coco_nce, i2ce_pretrained
from i2ce_jax import data as i2ce_data
from i2ce_jax import pretrained
from i2ce_jax.pretrained import recipe
from vtfn_jax.data import prepare_data
from vtfn_jax.features import FeatureStore

TRAINING_SEEDS = (0, 1, 2)


def images(records) -> frozenset[str]:
    return frozenset(r.image_id for r in records)


def write_coco_images(root, count: int) -> None:
    captions = [(i, 10 * i + k, f"coco image {i} caption {k}") for i in range(1, count + 1)
                for k in range(2)]  # fmt: skip
    write_coco(root / "coco" / "captions_val2017.json", captions)


def i2ce_dev(config) -> dict[str, frozenset[str]]:
    """The images of each dev split I2CE's data loader holds out under ``config``."""
    return {name: images(records) for name, records in i2ce_data.load_corpora(config)[1].items()}


def test_i2ce_dev_images_follow_data_seed_not_the_training_seed(tmp_path):
    """Dev images drawn from the training captions (no dev sets)."""
    write_coco_images(tmp_path, 40)
    config = i2ce_coco_margin.get_config(f"data_dir={tmp_path},flickr8k=False")
    config.data.dev_images = 10
    drawn = {}
    for seed in TRAINING_SEEDS:
        config.seed = seed
        drawn[seed] = i2ce_dev(config)
    assert len(drawn[0]["dev"]) == 10 and drawn[0] == drawn[1] == drawn[2]
    # data.seed 0 draws what training seed 0 drew before data.seed existed
    merged = corpus.read_sources(config.data)[0]
    assert drawn[0]["dev"] == images(corpus.hold_out_images(merged, 10, 0)[1])
    config.data.seed = 1
    assert i2ce_dev(config) != drawn[0]


def test_the_packaged_recipes_dev_splits_follow_data_seed(tmp_path):
    """The packaged models' dev sets: ``dev_coco`` drawn, ``dev_flickr`` whole."""
    root = make_data_dir(tmp_path)
    config = i2ce_pretrained.get_config(f"model=base,data_dir={root},sources=coco+flickr30k")
    config.data.dev_images = 4
    drawn = {}
    for seed in TRAINING_SEEDS:
        config.seed = seed
        drawn[seed] = i2ce_dev(config)
    assert drawn[0] == drawn[1] == drawn[2]
    coco = sources.dev_records("coco", root)[0]
    assert drawn[0]["dev_coco"] == images(corpus.hold_out_images(coco, 4, 0)[1])
    others = set()
    for data_seed in range(1, 6):
        config.data.seed = data_seed
        others.add(i2ce_dev(config)["dev_coco"])
    assert others - {drawn[0]["dev_coco"]}  # 4 of 6 val2017 images: other seeds, others


def test_every_shipped_recipe_draws_with_data_seed_0_as_it_did_with_config_seed_0():
    configs = [recipe.get_config(f"model={name}") for name in recipe.MODELS]
    configs += [module.get_config() for module in (i2ce_coco_margin, i2ce_coco_nce, coco_bow)]
    for config in configs:
        assert config.seed == 0 and config.data.seed == config_lib.DATA_SEED == 0
    for name in pretrained.NAMES:  # the packaged models' records state the same seeds
        meta = json.loads((pretrained.PACKAGE_DIR / name / pretrained.META_FILE).read_text())
        assert meta["config"]["seed"] == meta["config"]["data"]["seed"] == 0, name
        assert meta["config"]["data"]["seed"] == recipe.get_config(f"model={name}").data.seed


def vtfn_config(tmp_path):
    write_coco_images(tmp_path, 150)
    ids = [str(i) for i in range(1, 151)]
    features = np.random.default_rng(0).normal(size=(150, 8)).astype(np.float32)
    store = FeatureStore.from_arrays(ids, features).save(tmp_path / "features")
    return coco_bow.get_config(f"data_dir={tmp_path},features={store},runlocal")


def test_vtfn_test_and_dev_images_follow_data_seed_not_the_training_seed(tmp_path):
    config = vtfn_config(tmp_path)
    held = {}
    for seed in TRAINING_SEEDS:
        config.seed = seed
        records = prepare_data(config).records
        held[seed] = (images(records["dev"]), images(records["test"]))
    assert len(held[0][1]) == 50 and held[0] == held[1] == held[2]
    config.data.seed = 1
    records = prepare_data(config).records
    assert (images(records["dev"]), images(records["test"])) != held[0]


def test_a_misspelled_data_seed_override_is_refused():
    config = i2ce_coco_nce.get_config()
    config.lock()
    config_lib.apply_overrides(config, {"config.data.seed": 3})
    assert config.data.seed == 3
    with pytest.raises(KeyError, match=r"config\.data\.sead"):
        config_lib.apply_overrides(config, {"config.data.sead": 3})


def test_a_workdir_from_before_data_seed_resumes_with_its_draw(tmp_path):
    """Its held-out images were drawn by config.seed: that becomes its data.seed."""
    config = i2ce_coco_nce.get_config()
    old = json.loads(config.to_json_best_effort())
    del old["data"]["seed"]
    assert upgraded(old)["data"]["seed"] == 0
    (tmp_path / CONFIG_FILE).write_text(json.dumps(old))
    check_workdir(config, tmp_path)  # training seed 0 drew with 0: the same data
    old["seed"] = 2
    (tmp_path / CONFIG_FILE).write_text(json.dumps(old))
    with pytest.raises(CapsimError, match=r"data\.seed"):
        check_workdir(config, tmp_path)  # its draw was seed 2's: other held-out images
