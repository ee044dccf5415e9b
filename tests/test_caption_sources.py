"""The extra caption sources: readers, the contamination guards, merging, dev splits, positives."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from capsim import losses
from capsim.data import captions, corpus, sources
from capsim.errors import DataFormatError

FLICKR8K_TEST_PHOTO = "1056338697"  # a Flickr8k test image (capsim/data/flickr8k_test_photos.txt)


def write_multi30k(folder: Path, split: str, images: dict[str, list[str]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{split}_images.txt").write_text("".join(f"{name}\n" for name in images))
    for k in range(5):
        lines = "".join(f"{captions[k]}\n" for captions in images.values())
        (folder / f"{split}.{k + 1}.en").write_text(lines)
    return folder


def five(stem: str) -> list[str]:
    return [f"{stem} number {k}." for k in range(5)]


def write_coco(path: Path, annotations: list[tuple[int, int, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"annotations": [{"image_id": i, "id": c, "caption": t} for i, c, t in annotations]}
    path.write_text(json.dumps(payload))
    return path


def make_data_dir(root: Path) -> Path:
    """A data_dir in the shared layout: COCO val2014 + val2017 (overlapping), Flickr8k
    (train + test), Flickr30k (train holds a Flickr8k train photo; val), CC3M, COCO lines."""
    coco = [
        (img, img * 10 + k, f"coco image {img} caption {k}")
        for img in range(1, 13)
        for k in range(5)
    ]
    write_coco(root / "coco" / "captions_val2014.json", coco)
    write_coco(root / "coco" / "captions_val2017.json", coco[:30])  # val2017 ⊂ val2014
    flickr = root / "flickr8k"
    flickr.mkdir(parents=True)
    train8k, test8k = "2000000001_aaaa.jpg", f"{FLICKR8K_TEST_PHOTO}_bbbb.jpg"
    token = [f"{train8k}#{k}\tflickr photo one , caption {k} ." for k in range(5)]
    token += [f"{test8k}#{k}\tjudged caption {k}" for k in range(5)]
    (flickr / "Flickr8k.token.txt").write_text("\n".join(token) + "\n")
    (flickr / "Flickr_8k.trainImages.txt").write_text(train8k + "\n")
    (flickr / "Flickr_8k.devImages.txt").write_text("")
    (flickr / "Flickr_8k.testImages.txt").write_text(test8k + "\n")
    f30k = root / "extra_captions" / "flickr30k"
    train30k = {"2000000001.jpg": [f"Flickr photo one, caption {k}." for k in range(5)]}
    train30k.update({f"30000000{n}.jpg": five(f"flickr30k photo {n}") for n in range(4)})
    write_multi30k(f30k, "train", train30k)
    write_multi30k(f30k, "val", {f"40000000{n}.jpg": five(f"val photo {n}") for n in range(3)})
    cc3m = root / "extra_captions" / "cc3m"
    cc3m.mkdir(parents=True)
    (cc3m / "with_header.tsv").write_text(
        "caption\timage\na web caption\t0_1.jpg\ncoco image 1 caption 0\t1_2.jpg\n"
    )
    (cc3m / "plain.tsv").write_text("another web caption\thttp://x/y.jpg\n")
    lines = root / "extra_captions" / "coco"
    lines.mkdir(parents=True)
    (lines / "with_ids.txt").write_text("57870 a restaurant has tables.\n57870 chairs.\n")
    (lines / "plain.txt").write_text("a lone line caption\ncoco image 2 caption 1\n")
    return root


def data_config(
    root: Path, names: str, dev_sets: str = "coco+flickr", seed: int = 0
) -> ml_collections.ConfigDict:
    return ml_collections.ConfigDict(
        dict(
            data_dir=str(root),
            sources=tuple(names.split("+")),
            dev_sets=tuple(filter(None, dev_sets.split("+"))),
            dev_images=2,
            seed=seed,
        )
    )


def test_multi30k_groups_five_captions_per_image(tmp_path):
    write_multi30k(tmp_path, "train", {"1.jpg": five("a"), "2.jpg": five("b")})
    records = captions.read_multi30k(tmp_path, "train")
    assert len(records) == 10
    assert {r.image_id for r in records} == {"flickr30k/1.jpg", "flickr30k/2.jpg"}
    assert [r.text for r in records if r.image_id == "flickr30k/2.jpg"] == five("b")


def test_multi30k_bad_folders_name_the_file(tmp_path):
    write_multi30k(tmp_path, "train", {"1.jpg": five("a"), "2.jpg": five("b")})
    (tmp_path / "train.3.en").write_text("only one line\n")
    with pytest.raises(DataFormatError, match=r"train\.3\.en.*1 captions for the 2 images"):
        captions.read_multi30k(tmp_path, "train")
    write_multi30k(tmp_path, "train", {"1.jpg": ["a", "b", "  ", "d", "e"]})
    with pytest.raises(DataFormatError, match=r"train\.3\.en:1: empty caption"):
        captions.read_multi30k(tmp_path, "train")


def test_a_flickr30k_folder_with_a_flickr8k_test_photo_is_refused_by_training(tmp_path):
    root = make_data_dir(tmp_path)
    folder = root / "extra_captions" / "flickr30k"
    images = (folder / "train_images.txt").read_text() + f"{FLICKR8K_TEST_PHOTO}.jpg\n"
    (folder / "train_images.txt").write_text(images)
    for k in range(1, 6):
        path = folder / f"train.{k}.en"
        path.write_text(path.read_text() + "a judged photo.\n")
    with pytest.raises(
        DataFormatError, match=rf"train_images\.txt:6: image '{FLICKR8K_TEST_PHOTO}\.jpg'"
    ):
        corpus.load_sources(data_config(root, "coco+flickr30k"))
    with pytest.raises(DataFormatError, match="Flickr8k test image"):
        sources.read_source("flickr30k", root)  # the reader refuses it without Flickr8k's files
    from configs import i2ce_coco_nce
    from i2ce_jax.train import train_and_evaluate

    config = i2ce_coco_nce.get_config(f"data_dir={root},sources=coco+flickr30k,runlocal")
    with pytest.raises(DataFormatError, match=rf"image '{FLICKR8K_TEST_PHOTO}\.jpg'"):
        train_and_evaluate(config, tmp_path / "work")  # the training command refuses it


def test_a_flickr30k_caption_of_a_flickr8k_test_image_is_refused(tmp_path):
    root = make_data_dir(tmp_path)
    write_multi30k(
        root / "extra_captions" / "flickr30k",
        "train",
        {"5000000001.jpg": ["Judged caption 3!", "b", "c", "d", "e"]},
    )
    with pytest.raises(DataFormatError, match=r"train\.1\.en.*'5000000001\.jpg'.*Flickr8k test"):
        corpus.load_sources(data_config(root, "flickr30k", dev_sets="coco"))


KARPATHY_TEST_IMAGE = (
    391895  # a Karpathy COCO test image (capsim/data/karpathy_coco_test_images.txt)
)


def test_the_shipped_karpathy_test_list_is_the_split(shared_data):
    """The package's list equals the split file in ../shared/data (whose hash its README gives)."""
    listed = shared_data / "coco" / "karpathy_test_images.txt"
    if not listed.is_file():
        pytest.skip(f"{listed} is absent")
    ids = {line.split()[1] for line in listed.read_text().splitlines()}
    assert sources.karpathy_coco_test_images() == ids and len(ids) == 5000
    assert str(KARPATHY_TEST_IMAGE) in ids


def write_karpathy(path: Path, images: list[tuple[int, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "images": [
            {"cocoid": i, "split": split, "sentences": [{"raw": f"photo {i}", "sentid": i}]}
            for i, split in images
        ]
    }
    path.write_text(json.dumps(payload))
    return path


def test_karpathy_test_split_is_refused_naming_an_image(tmp_path):
    path = write_karpathy(
        tmp_path / "coco" / "dataset_coco.json", [(1, "train"), (KARPATHY_TEST_IMAGE, "test")]
    )
    config = data_config(tmp_path, "coco_karpathy", dev_sets="")
    config.karpathy_splits = ("train", "test")
    config.keep_karpathy_test = True  # keeping dropped images never admits the split itself
    with pytest.raises(
        DataFormatError, match=rf"{path}.*'test' \(e\.g\. image {KARPATHY_TEST_IMAGE}\)"
    ):
        corpus.load_sources(config)
    config.karpathy_splits = ("train", "restval")
    assert [r.image_id for r in corpus.read_sources(config)[0]] == ["1"]


def test_karpathy_test_images_are_dropped_from_training_by_default(tmp_path, caplog):
    """From every COCO source (caption JSON, COCO lines with ids), after the dev draw,
    with a logged count; data.keep_karpathy_test=True keeps them."""
    root = make_data_dir(tmp_path)
    test_image = KARPATHY_TEST_IMAGE
    write_coco(
        root / "coco" / "captions_train2014.json",
        [(test_image, 1, "a judged photo"), (test_image, 2, "the same judged photo")],
    )
    (root / "extra_captions" / "coco" / "judged.txt").write_text(f"{test_image} a judged line.\n")
    config = data_config(root, "coco+coco_lines", dev_sets="")
    with caplog.at_level("WARNING"):
        train, _ = corpus.load_sources(config)
    assert str(test_image) not in {r.image_id for r in train}
    assert "dropped 3 training captions of 1 Karpathy COCO test images" in caplog.text
    config.keep_karpathy_test = True
    kept, _ = corpus.load_sources(config)
    assert len([r for r in kept if r.image_id == str(test_image)]) == 3
    assert len(kept) == len(train) + 3


def test_i2ce_caption_files_drop_karpathy_test_images(tmp_path, caplog):
    """I2CE's default sources (no dev sets: dev drawn from training): dropped after the draw."""
    from configs import i2ce_coco_margin
    from i2ce_jax import data as i2ce_data

    captions = [
        (i, 10 * i + k, f"coco image {i} caption {k}") for i in range(1, 31) for k in (0, 1)
    ]
    captions += [(KARPATHY_TEST_IMAGE, 1, "a judged photo"), (KARPATHY_TEST_IMAGE, 2, "again")]
    write_coco(tmp_path / "coco" / "captions_val2017.json", captions)
    config = i2ce_coco_margin.get_config(f"data_dir={tmp_path},flickr8k=False")
    config.data.dev_images = 2
    with caplog.at_level("WARNING"):
        train, dev, _ = i2ce_data.load_corpora(config)
    trained = {r.image_id for r in train}
    assert (
        str(KARPATHY_TEST_IMAGE) not in trained
        and len(trained | {r.image_id for r in dev["dev"]}) >= 30
    )
    assert "Karpathy COCO test images" in caplog.text


def test_coco_train_drops_the_karpathy_val_images_listed_beside_the_captions(tmp_path):
    """I2CE Table 1's "train split": ``coco`` less the images of karpathy_val_images.txt
    (its format: path and COCO id a line); the test images go by the general rule."""
    root = make_data_dir(tmp_path)
    listed = root / "coco" / sources.KARPATHY_VAL_LIST
    listed.write_text("val2014/COCO_val2014_000000000002.jpg 2\nval2014/x_000000000005.jpg 5\n")
    full = {r.image_id for r in sources.read_source("coco", root)}
    train = {r.image_id for r in sources.read_source("coco_train", root)}
    assert full - train == {"2", "5"} and len(train) == len(full) - 2
    listed.write_text("val2014/COCO_val2014_000000000002.jpg 2\nnot a line\n")
    with pytest.raises(DataFormatError, match=rf"{listed}:2: expected 'PATH COCO_ID'"):
        sources.read_source("coco_train", root)
    listed.unlink()
    with pytest.raises(DataFormatError, match=rf"{listed}: missing: source 'coco_train'"):
        sources.read_source("coco_train", root)


def test_coco_train_on_the_shared_data_keeps_the_karpathy_train_images(shared_data):
    """val2017's 5,000 images: 608 are Karpathy val images (docs/data.md says about 600)."""
    listed = shared_data / "coco" / sources.KARPATHY_VAL_LIST
    if not listed.is_file():
        pytest.skip(f"{listed} is absent")
    full = {r.image_id for r in sources.read_source("coco", shared_data)}
    train = {r.image_id for r in sources.read_source("coco_train", shared_data)}
    val = {line.split()[1] for line in listed.read_text().splitlines()}
    assert train == full - val and len(full) - len(train) == 608


def test_vtfn_on_real_coco_trains_on_no_karpathy_test_image(shared_data, caplog):
    """VTFN on COCO val2017 with the object labels: 593 of its images are Karpathy test
    images; none is trained on (held-out dev and test images may be among them)."""
    if not (shared_data / "coco" / "val2014_object_labels.json").is_file():
        pytest.skip("COCO files are absent")
    from configs import coco_bow
    from vtfn_jax import data as vtfn_data

    config = coco_bow.get_config(f"data_dir={shared_data}")
    with caplog.at_level("WARNING"):
        records = vtfn_data.prepare_data(config).records
    test = sources.karpathy_coco_test_images()
    assert not test & {r.image_id for r in records["train"]}
    match = re.search(r"dropped (\d+) training captions of (\d+) Karpathy", caplog.text)
    assert match and 400 < int(match.group(2)) <= 593, caplog.text


def test_vtfn_trains_on_named_sources_and_counts_captions_without_features(shared_data, caplog):
    """VTFN reads the registry like I2CE: Flickr8k's photos have no COCO object labels,
    so their captions are dropped and counted in the log; COCO's are kept."""
    if not (shared_data / "coco" / "val2014_object_labels.json").is_file():
        pytest.skip("COCO files are absent")
    from configs import coco_bow
    from vtfn_jax import data as vtfn_data

    config = coco_bow.get_config(f"data_dir={shared_data},sources=coco+flickr8k")
    with caplog.at_level("WARNING"):
        records = vtfn_data.prepare_data(config).records
    flickr = sources.read_source("flickr8k", shared_data)
    match = re.search(r"skipped (\d+) captions of (\d+) images without features", caplog.text)
    assert match, caplog.text
    assert int(match.group(1)) >= len(flickr)
    assert int(match.group(2)) >= len({r.image_id for r in flickr})
    kept = {r.image_id for split in records.values() for r in split}
    assert kept and all(image.isdigit() for image in kept)  # COCO ids only


def test_cc3m_with_and_without_header(tmp_path):
    header = tmp_path / "a.tsv"
    header.write_text("caption\timage\nfirst caption\t0_1.jpg\nsecond\t1_2.jpg\n")
    plain = tmp_path / "b.tsv"
    plain.write_text("caption of a url\thttp://x/1.jpg\n")
    assert [r.text for r in captions.read_cc3m_tsv(header)] == ["first caption", "second"]
    records = captions.read_cc3m_tsv(plain)
    assert [(r.image_id, r.text) for r in records] == [("cc3m/b:1", "caption of a url")]
    plain.write_text("ok\tu\nno tab here\n")
    with pytest.raises(DataFormatError, match=r"b\.tsv:2: expected 'caption<TAB>image'"):
        captions.read_cc3m_tsv(plain)


def test_coco_lines_with_and_without_ids(tmp_path):
    ids = tmp_path / "ids.txt"
    ids.write_text("57870 a restaurant.\n57870 chairs\n9 a dog\n")
    records = captions.read_coco_lines(ids)
    assert [r.image_id for r in records] == ["57870", "57870", "9"]
    assert records[0].text == "a restaurant."
    plain = tmp_path / "plain.txt"
    plain.write_text("a bicycle replica.\na room\n")
    assert [r.image_id for r in captions.read_coco_lines(plain)] == [
        "coco_line/plain:1",
        "coco_line/plain:2",
    ]
    ids.write_text("57870 a restaurant.\nno id on this line\n")
    with pytest.raises(DataFormatError, match=r"ids\.txt:2: expected '<COCO image id> <caption>'"):
        captions.read_coco_lines(ids)


def test_overlapping_sources_are_trained_on_once(tmp_path):
    root = make_data_dir(tmp_path)
    train, dev = corpus.load_sources(data_config(root, "coco+flickr8k+flickr30k+cc3m+coco_lines"))
    texts = [sources.normalize(r.text) for r in train]
    assert len(texts) == len(set(texts))  # every caption once
    # Flickr8k's photo 2000000001 is Flickr30k's 2000000001.jpg: one image, its five captions
    flickr_one = [r for r in train if r.image_id == "flickr/2000000001"]
    assert len(flickr_one) == 5
    # val2017 ⊂ val2014: 12 COCO images of 5 captions, minus the 2 dev images
    coco = [r for r in train if r.image_id.isdigit() and r.image_id != "57870"]
    assert len({r.image_id for r in coco}) == 10 and len(coco) == 50
    # a CC3M row or COCO line equal to a COCO caption is dropped; the others stay
    assert "a web caption" in texts and "a lone line caption" in texts
    web = [
        sources.normalize(r.text) for r in train if r.image_id.startswith(("cc3m/", "coco_line/"))
    ]
    assert "coco image 1 caption 0" not in web and "coco image 2 caption 1" not in web
    assert {len(v) for v in dev.values()} == {10, 15}


def test_dev_splits_do_not_depend_on_the_mixture_and_stay_out_of_training(tmp_path):
    root = make_data_dir(tmp_path)
    small_train, small_dev = corpus.load_sources(data_config(root, "coco", seed=3))
    big_train, big_dev = corpus.load_sources(
        data_config(root, "coco+flickr30k+cc3m+coco_lines", seed=3)
    )
    assert small_dev == big_dev
    held = {r.image_id for records in big_dev.values() for r in records}
    assert not held & {r.image_id for r in big_train}
    assert not held & {r.image_id for r in small_train}
    assert len(big_train) > len(small_train)


def test_the_coco_source_reads_captions_train2014_json(tmp_path):
    write_coco(tmp_path / "coco" / "captions_train2014.json", [(7, 70, "A cat."), (7, 71, "Cat.")])
    records = sources.read_source("coco", tmp_path)
    assert [(r.image_id, r.text, r.split) for r in records] == [
        ("7", "A cat.", "train"),
        ("7", "Cat.", "train"),
    ]


def test_real_extra_captions(shared_data):
    extra = shared_data / "extra_captions"
    if not extra.is_dir():
        pytest.skip(f"{extra} is absent")
    flickr = sources.read_source("flickr30k", shared_data)
    assert len(flickr) == 5 * 28039 and len({r.image_id for r in flickr}) == 28039
    cc3m = sources.read_source("cc3m", shared_data)
    assert len(cc3m) == 15833 + 34301 and len({r.image_id for r in cc3m}) == len(cc3m)
    lines = sources.read_source("coco_lines", shared_data)
    assert len(lines) == 9884 + 8705 + 8718
    assert len({r.image_id for r in lines if r.image_id.isdigit()}) == 1999
    val = captions.read_multi30k(extra / "flickr30k", "val")
    assert len(val) == 5 * 983


def test_the_val2014_subset_adds_captions_beyond_val2017(shared_data):
    """coco_extra (extra_captions/coco/captions_val2014_subset.json, 4,800 val2014 images)
    beside coco (val2017, a subset of val2014): after merging and the Karpathy guard,
    18,402 of its captions on 3,679 images are new (compared lower-cased without
    punctuation, per image)."""
    if not (shared_data / "extra_captions" / "coco" / "captions_val2014_subset.json").is_file():
        pytest.skip("the val2014 subset is absent")
    coco = sources.read_source("coco", shared_data)
    extra = sources.read_source("coco_extra", shared_data)
    assert len(extra) == 24019 and len({r.image_id for r in extra}) == 4800
    kept, _ = sources.drop_karpathy_test(sources.merge(coco + extra))
    in_coco = {(r.image_id, sources.normalize(r.text)) for r in coco}
    extra_ids = {r.caption_id for r in extra}
    new = [
        r
        for r in kept
        if r.caption_id in extra_ids and (r.image_id, sources.normalize(r.text)) not in in_coco
    ]
    assert (len(new), len({r.image_id for r in new})) == (18402, 3679)


def test_single_caption_images_are_never_their_own_positive():
    """A row paired with itself (group -1 - image) drops out of InfoNCE's, the triplet's
    and the rank loss's positives, and still serves as a negative of the others."""
    from i2ce_jax.model import semantic_positives

    rng = np.random.default_rng(0)
    sim = jnp.asarray(rng.uniform(-1, 1, (4, 4)), jnp.float32)
    positive = semantic_positives({"group": jnp.array([0, 1, -3, 3])}, "similar", True)
    np.testing.assert_array_equal(np.diagonal(positive), [True, True, False, True])
    perm = jnp.array([1, 2, 3, 0])
    logits = np.asarray(sim) / 0.05

    def rows(scaled):
        lp = scaled - np.log(np.exp(scaled).sum(1, keepdims=True))
        return np.mean([-lp[i, i] for i in (0, 1, 3)])

    expected = 0.5 * (rows(logits) + rows(logits.T))
    got = losses.get_loss("infonce")(sim, positive, perm, temperature=0.05)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    s = np.asarray(sim)
    hinge = [max(0.0, 0.2 - s[i, i] + s[i, perm[i]]) for i in (0, 1, 3)]
    got = losses.get_loss("triplet")(sim, positive, perm, margin=0.2)
    np.testing.assert_allclose(got, np.mean(hinge), rtol=1e-5)
    ranked = [max(0.0, 0.2 - s[i, i] + s[i, k]) for i in (0, 1, 3) for k in range(4) if k != i]
    ranked += [max(0.0, 0.2 - s[i, i] + s[k, i]) for i in (0, 1, 3) for k in range(4) if k != i]
    got = losses.get_loss("rank")(sim, positive, perm, margin=0.2)
    np.testing.assert_allclose(got, np.sum(ranked) / 4, rtol=1e-5)


def test_make_batch_marks_captions_without_a_second_caption(tmp_path):
    from capsim.data.records import CaptionRecord
    from i2ce_jax.data import make_batch_fn

    records = [
        CaptionRecord("a", "1", "a dog runs", "train"),
        CaptionRecord("a", "2", "a dog is running", "train"),
        CaptionRecord("cc3m/x:1", "3", "a web caption", "train"),
    ]
    vocab = corpus.build_vocab(records, min_count=1, max_size=None)
    encoded = corpus.encode_corpus(records, vocab, max_len=8)
    batch = make_batch_fn(encoded)(np.arange(3), np.array([0.1, 0.7, 0.5]))
    np.testing.assert_array_equal(batch["group"], [0, 0, -2])  # image 1 has no other caption
    np.testing.assert_array_equal(batch["similar_ids"][2], batch["anchor_ids"][2])
    np.testing.assert_array_equal(batch["similar_ids"][0], batch["anchor_ids"][1])


def test_correlation_losses_refuse_single_caption_images(tmp_path):
    from configs import i2ce_coco_nce
    from i2ce_jax.train import train_and_evaluate

    root = make_data_dir(tmp_path / "data")
    config = i2ce_coco_nce.get_config(
        f"data_dir={root},sources=coco+cc3m,dev_sets=coco,runlocal,embed=8,hidden=8"
    )
    config.loss.name = "kendall"  # pairs a caption with a second one of its image
    config.data.dev_images = 2
    config.data.min_count = 1
    with pytest.raises(ValueError, match=r"loss 'kendall'.*have one caption"):
        train_and_evaluate(config, tmp_path / "work")


def test_all_splits_sources_add_every_split_but_the_judged_and_held_out_ones(tmp_path):
    root = make_data_dir(tmp_path)
    flickr = root / "flickr8k"
    dev8k = "2000000002_cccc.jpg"
    with (flickr / "Flickr8k.token.txt").open("a") as token:
        token.writelines(f"{dev8k}#{k}\ta flickr8k dev caption {k}\n" for k in range(5))
    (flickr / "Flickr_8k.devImages.txt").write_text(dev8k + "\n")
    write_multi30k(
        root / "extra_captions" / "flickr30k", "test_2016", {"6000000001.jpg": five("test 2016")}
    )
    train, dev = corpus.load_sources(data_config(root, "flickr8k_all+flickr30k_all"))
    images = {r.image_id for r in train}
    assert {"flickr/2000000001", "flickr/2000000002", "flickr/6000000001"} <= images
    assert f"flickr/{FLICKR8K_TEST_PHOTO}" not in images  # judged by Flickr8k-Expert
    assert not images & {r.image_id for r in dev["dev_flickr"]}  # Flickr30k val is held out


def test_the_shapes_world_is_a_source_with_its_own_splits():
    data = ml_collections.ConfigDict(
        dict(sources=("shapes_world",), shapes_world=dict(num_scenes=60, seed=3))
    )
    world = corpus.generated_world(data)
    assert world is corpus.generated_world(data)  # built once, read by captions and evaluators
    train, dev = corpus.load_sources(data)
    assert {r.split for r in train} == {"train"} and set(dev) == {"dev"}
    assert {r.split for r in dev["dev"]} == {"val"}
    assert len(train) + len(dev["dev"]) < len(world.captions)  # its test split stays out
    read = sources.read_source("shapes_world", "/nonexistent", corpus.source_options(data))
    assert [r.text for r in read] == [r.text for r in world.captions]
    files = ml_collections.ConfigDict(dict(sources=("coco",)))
    assert corpus.generated_world(files) is None


def test_the_shapes_world_is_not_mixed_with_other_sources():
    data = ml_collections.ConfigDict(
        dict(sources=("coco", "shapes_world"), shapes_world=dict(num_scenes=60, seed=3))
    )
    with pytest.raises(ValueError, match=r"'shapes_world' is a generated world.*alone"):
        corpus.generated_world(data)


def test_a_workdir_that_chose_the_world_with_data_source_loads_and_resumes(tmp_path):
    """Runs before the world became a source saved ``data.source``: their config loads in
    today's keys, and today's config of the same run may resume there."""
    from capsim.errors import CapsimError
    from capsim.train.preflight import check_workdir
    from capsim.workdir import load_config
    from configs import demo_bow

    config = demo_bow.get_config("runlocal")
    old = json.loads(config.to_json_best_effort())
    old["data"].update(source="shapes_world", sources=["coco"])  # as 8d66ab8 wrote it
    (tmp_path / "config.json").write_text(json.dumps(old))
    loaded = load_config(tmp_path).data
    assert list(loaded.sources) == ["shapes_world"] and "source" not in loaded
    check_workdir(config, tmp_path)  # the same model: no error
    files = ml_collections.ConfigDict(json.loads(config.to_json_best_effort()))
    files.data.sources = ("coco",)
    with pytest.raises(CapsimError, match=r"data\.sources"):
        check_workdir(files, tmp_path)
