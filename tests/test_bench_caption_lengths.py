"""bench/speed/caption_lengths.py: the paragraphs it times and the tables it prints."""

from __future__ import annotations

import pytest

from bench.speed import caption_lengths


@pytest.fixture(scope="module")
def coco_captions(shared_data):
    if not (shared_data / "coco" / "captions_val2017.json").is_file():
        pytest.skip("COCO val2017 captions are not in ../shared/data")


@pytest.mark.parametrize("words", [10, 160])
def test_paragraphs_have_the_length_asked_and_pair_different_captions(coco_captions, words):
    gts, res = caption_lengths.paragraphs(20, words)
    assert list(gts) == list(res) == list(range(20))
    for key in res:
        (candidate,), (reference,) = res[key], gts[key]
        assert len(candidate.split()) == len(reference.split()) == words
        assert candidate != reference  # the first captions against the second ones
    assert caption_lengths.paragraphs(20, words) == (gts, res)  # the same every run
    # Image k's paragraph starts where image k + 1's begins one caption earlier.
    assert res[1][0].split()[:5] != res[0][0].split()[:5]


def test_tables_show_each_ratio_with_its_range_and_the_load():
    meteor = {
        "words": 40,
        "pairs": 300,
        "jar_ms_per_pair": 1.2,
        "capsim_ms_per_pair": 0.15,
        "ratio_median": 8.0,
        "ratio_min": 6.5,
        "ratio_max": 9.25,
        "threads": 2,
        "threads_ms_per_pair": 0.1,
        "threads_ratio_median": 12.0,
        "threads_ratio_min": 10.0,
        "threads_ratio_max": 13.0,
        "load_start": 1.0,
        "load_end": 1.5,
    }
    table = caption_lengths.meteor_table([meteor])
    row = "| 40 | 300 | 1.200 | 0.150 | **8.0×** (6.5-9.2) | 0.100 | **12.0×** (10.0-13.0) |"
    assert row in table
    assert "2 threads" in table and "1.00 / 1.50" in table
    whole = {**meteor, "images": 500, "capsim_s": 0.5, "pycocoevalcap_s": 9.0}
    table = caption_lengths.evaluate_table([whole])
    assert "| 40 | 500 | 0.50 | 9.00 | **8.0×** (6.5-9.2) |" in table
