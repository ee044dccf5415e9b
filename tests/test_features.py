"""FeatureStore validation, caption alignment, PCA and COCO object-label features."""

from __future__ import annotations

import json
import logging
import math

import numpy as np
import pytest
from array_record.python.array_record_module import ArrayRecordWriter

from capsim.data.records import CaptionRecord
from capsim.errors import DataFormatError, FeatureError
from vtfn_jax.coco_labels import COCO_CATEGORIES, coco_object_label_features
from vtfn_jax.features import ARRAY_RECORD_FILE, ArrayRecordFeatures, FeatureStore, align_captions
from vtfn_jax.pca import Pca, fit_pca

MATRIX = np.arange(12, dtype=np.float64).reshape(4, 3)
IDS = ["a", "b", "c", "d"]


def test_store_basics_and_lookup():
    store = FeatureStore.from_arrays([139, 285, "x", "y"], MATRIX, source="test")
    assert (len(store), store.dim, store.ids) == (4, 3, ("139", "285", "x", "y"))
    assert 139 in store and "285" in store and "z" not in store
    assert store.matrix.dtype == np.float32 and not store.matrix.flags.writeable
    np.testing.assert_array_equal(store.lookup(["y", "139"]), MATRIX[[3, 0]])
    np.testing.assert_array_equal(store.rows(["x", "x"]), [2, 2])
    with pytest.raises(FeatureError, match=r"image 'missing': no feature in test"):
        store.lookup(["x", "missing"])


def test_save_and_load_round_trip(tmp_path):
    store = FeatureStore.from_arrays(IDS, MATRIX, source="unit test")
    store.save(tmp_path / "out")
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())
    assert meta == {"source": "unit test", "count": 4, "dim": 3, "layout": "npy"}
    loaded = FeatureStore.load(tmp_path / "out", expected_dim=3)
    assert loaded.ids == store.ids
    np.testing.assert_array_equal(loaded.matrix, store.matrix)


def _store(rows: int = 7, dim: int = 5) -> FeatureStore:
    matrix = np.random.default_rng(0).standard_normal((rows, dim)).astype(np.float32)
    return FeatureStore.from_arrays([f"img{i}" for i in range(rows)], matrix)


def test_array_record_layout_round_trips_and_reads_any_rows(tmp_path):
    store = _store()
    store.save(tmp_path, layout="array_record")
    assert not (tmp_path / "features.npy").exists()
    loaded = FeatureStore.load(tmp_path, expected_dim=5)
    assert loaded.ids == store.ids
    np.testing.assert_array_equal(loaded.matrix, store.matrix)
    reader = ArrayRecordFeatures(tmp_path / ARRAY_RECORD_FILE, dim=5)
    rows = np.array([6, 0, 3, 3])
    assert reader.shape == (7, 5)
    np.testing.assert_array_equal(reader[rows], store.matrix[rows])


def test_damaged_array_record_stores_name_the_file(tmp_path):
    store = _store()
    store.save(tmp_path, layout="array_record")
    meta = json.loads((tmp_path / "meta.json").read_text())
    (tmp_path / "meta.json").write_text(json.dumps({**meta, "dim": 4}))
    with pytest.raises(DataFormatError, match=r"features\.array_record: record 0 has 20 bytes"):
        FeatureStore.load(tmp_path)
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    (tmp_path / "ids.json").write_text(json.dumps(list(store.ids[:-1])))
    with pytest.raises(DataFormatError, match="7 records but 6 image ids"):
        FeatureStore.load(tmp_path)
    records = tmp_path / ARRAY_RECORD_FILE
    records.write_bytes(records.read_bytes()[:40])
    with pytest.raises(DataFormatError, match=r"features\.array_record"):
        FeatureStore.load(tmp_path)


def test_non_finite_array_record_features_name_the_image(tmp_path):
    store = _store()
    store.save(tmp_path, layout="array_record")
    matrix = store.matrix.copy()
    matrix[4, 2] = np.nan
    writer = ArrayRecordWriter(str(tmp_path / ARRAY_RECORD_FILE), "group_size:1")
    for row in matrix:
        writer.write(row.tobytes())
    writer.close()
    with pytest.raises(FeatureError, match="img4"):
        FeatureStore.load(tmp_path)


def test_unknown_layout_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown feature layout 'hdf5'"):
        _store().save(tmp_path, layout="hdf5")


def test_from_npy_with_txt_and_json_ids(tmp_path):
    np.save(tmp_path / "f.npy", MATRIX)
    (tmp_path / "ids.txt").write_text("a\nb\nc\nd\n")
    (tmp_path / "ids.json").write_text(json.dumps([1, 2, "c", "d"]))
    assert FeatureStore.from_npy(tmp_path / "f.npy", tmp_path / "ids.txt").ids == tuple(IDS)
    assert FeatureStore.from_npy(tmp_path / "f.npy", tmp_path / "ids.json").ids == (
        "1",
        "2",
        "c",
        "d",
    )


@pytest.mark.parametrize(
    ("ids", "matrix", "error", "message"),
    [
        (IDS, MATRIX.ravel(), DataFormatError, r"f.npy: features must be a 2-D"),
        (IDS[:3], MATRIX, DataFormatError, r"f.npy: 4 feature rows but 3 image ids"),
        (
            ["a", "b", "a", "d"],
            MATRIX,
            FeatureError,
            r"image 'a': appears twice in the ids of .*f.npy \(rows 0 and 2\)",
        ),
        (
            IDS,
            np.where(MATRIX == 7, np.nan, MATRIX),
            FeatureError,
            r"image 'c': non-finite feature values in .*f.npy row 2",
        ),
        (IDS, np.where(MATRIX == 0, np.inf, MATRIX), FeatureError, r"image 'a': non-finite"),
    ],
)
def test_bad_features_name_the_file_or_id(tmp_path, ids, matrix, error, message):
    np.save(tmp_path / "f.npy", matrix)
    (tmp_path / "ids.json").write_text(json.dumps(ids))
    with pytest.raises(error, match=message):
        FeatureStore.from_npy(tmp_path / "f.npy", tmp_path / "ids.json")


def test_wrong_dimension_names_the_file(tmp_path):
    np.save(tmp_path / "f.npy", MATRIX)
    (tmp_path / "ids.json").write_text(json.dumps(IDS))
    with pytest.raises(FeatureError, match=r"f.npy has feature dim 3 \(all rows\), expected 2048"):
        FeatureStore.from_npy(tmp_path / "f.npy", tmp_path / "ids.json", expected_dim=2048)


def test_bad_id_files(tmp_path):
    np.save(tmp_path / "f.npy", MATRIX)
    (tmp_path / "ids.txt").write_text("a\n\nc\nd\n")
    with pytest.raises(DataFormatError, match=r"ids.txt:2: empty image id"):
        FeatureStore.from_npy(tmp_path / "f.npy", tmp_path / "ids.txt")
    (tmp_path / "ids.json").write_text(json.dumps(["a", None, "c", "d"]))
    with pytest.raises(DataFormatError, match=r"ids.json: entry 1 is None"):
        FeatureStore.from_npy(tmp_path / "f.npy", tmp_path / "ids.json")
    (tmp_path / "ids.csv").write_text("a,b,c,d")
    with pytest.raises(DataFormatError, match=r"ids.csv: image ids must be a .json list or a .txt"):
        FeatureStore.from_npy(tmp_path / "f.npy", tmp_path / "ids.csv")


def test_align_captions_reports_and_skips_missing_images(caplog):
    store = FeatureStore.from_arrays(IDS, MATRIX, source="test store")
    records = [
        CaptionRecord("c", "1", "a cat", "train"),
        CaptionRecord("gone", "2", "a dog", "train"),
        CaptionRecord("a", "3", "a bird", "train"),
        CaptionRecord("gone", "4", "a fish", "train"),
        CaptionRecord("lost", "5", "a cow", "train"),
        CaptionRecord("c", "6", "two cats", "train"),
    ]
    with caplog.at_level(logging.WARNING):
        kept, rows, report = align_captions(records, store)
    assert [record.caption_id for record in kept] == ["1", "3", "6"]
    np.testing.assert_array_equal(rows, [2, 0, 2])
    assert (report.kept_captions, report.skipped_captions) == (3, 3)
    assert (report.kept_images, report.skipped_images) == (2, 2)
    assert report.example_missing_ids == ("gone", "lost")
    assert "skipped 3 captions of 2 images without features (e.g. gone, lost)" in caplog.text


def test_align_captions_silent_when_complete(caplog):
    store = FeatureStore.from_arrays(IDS, MATRIX, source="test store")
    with caplog.at_level(logging.WARNING):
        _, rows, report = align_captions([CaptionRecord("b", "1", "x", "test")], store)
    assert report.skipped_captions == 0 and caplog.text == ""
    np.testing.assert_array_equal(rows, [1])


def test_pca_matches_covariance_eigenvectors(tmp_path):
    rng = np.random.default_rng(0)
    features = rng.normal(size=(50, 6)) @ rng.normal(size=(6, 6)) + 3.0
    pca = fit_pca(features, 3)
    covariance = np.cov(features, rowvar=False)
    eigenvalues, eigenvectors = np.linalg.eigh(covariance)
    order = np.argsort(eigenvalues)[::-1][:3]
    np.testing.assert_allclose(pca.explained_variance, eigenvalues[order], rtol=1e-4)
    np.testing.assert_allclose(
        np.abs(pca.components @ eigenvectors[:, order]), np.eye(3), atol=1e-4
    )
    projected = pca.transform(features)
    assert projected.shape == (50, 3) and projected.dtype == np.float32
    np.testing.assert_allclose(projected.mean(axis=0), 0.0, atol=1e-4)
    np.testing.assert_allclose(projected.var(axis=0, ddof=1), eigenvalues[order], rtol=1e-4)
    pca.save(tmp_path / "pca.npz")
    loaded = Pca.load(tmp_path / "pca.npz")
    np.testing.assert_array_equal(loaded.transform(features), projected)
    with pytest.raises(ValueError, match=r"PCA dim must be in \[1, 6\]"):
        fit_pca(features, 7)
    with pytest.raises(ValueError, match=r"PCA expects \[N, 6\] features, got \(2, 5\)"):
        pca.transform(np.zeros((2, 5)))


def test_pca_sign_is_fixed():
    rng = np.random.default_rng(1)
    features = rng.normal(size=(30, 4))
    first, flipped = fit_pca(features, 2), fit_pca(-features, 2)
    np.testing.assert_allclose(flipped.components, first.components, atol=1e-5)
    for component in first.components:
        assert component[np.argmax(np.abs(component))] > 0


def test_bad_coco_label_file(tmp_path):
    path = tmp_path / "labels.json"
    path.write_text(
        json.dumps(
            [
                {"file_name": "COCO_val2014_000000000001.jpg", "labels": [3]},
                {"file_name": "COCO_val2014_000000000002.jpg", "labels": [80]},
            ]
        )
    )
    with pytest.raises(
        DataFormatError, match=r"labels.json: entry 1 \(COCO_val2014_000000000002.jpg\): label 80"
    ):
        coco_object_label_features(path)
    path.write_text(json.dumps([{"file": "x.jpg", "labels": []}]))
    with pytest.raises(DataFormatError, match=r"labels.json: entry 0 is not"):
        coco_object_label_features(path)


SPOT_CHECKS = {
    "139": {
        "tv",
        "microwave",
        "book",
        "vase",
        "person",
        "potted_plant",
        "refrigerator",
        "chair",
        "clock",
        "dining_table",
    },
    "285": {"bear"},
    "632": {"potted_plant", "book", "chair", "bed"},
    "724": {"truck", "car", "stop_sign"},
}


def test_coco_categories_order():
    assert len(COCO_CATEGORIES) == 80 and list(COCO_CATEGORIES) == sorted(COCO_CATEGORIES)
    assert (COCO_CATEGORIES[0], COCO_CATEGORIES[49], COCO_CATEGORIES[79]) == (
        "airplane",
        "person",
        "zebra",
    )


def test_coco_object_labels_real_file(shared_data):
    path = shared_data / "coco" / "val2014_object_labels.json"
    val2017 = json.loads((shared_data / "coco" / "captions_val2017.json").read_text())
    val2017_ids = [image["id"] for image in val2017["images"]]
    store = coco_object_label_features(path, image_ids=val2017_ids)
    assert (len(store), store.dim) == (4952, 80)
    assert "COCO object labels (multi-hot, not CNN features)" in store.source
    for image_id, names in SPOT_CHECKS.items():
        vector = store.lookup([image_id])[0]
        assert {COCO_CATEGORIES[i] for i in np.flatnonzero(vector)} == names
        assert set(np.unique(vector)) == {0.0, 1.0}

    entries = json.loads(path.read_text())
    person_df = sum(COCO_CATEGORIES.index("person") in entry["labels"] for entry in entries)
    weighted = coco_object_label_features(path, idf=True, image_ids=["139", "285"])
    assert sorted(weighted.ids) == ["139", "285"]  # file order, not request order
    person = weighted.lookup(["139"])[0, COCO_CATEGORIES.index("person")]
    assert person == pytest.approx(math.log(len(entries) / person_df), rel=1e-6)
    assert "not CNN features" in weighted.source
