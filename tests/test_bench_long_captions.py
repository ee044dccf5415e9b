"""bench/speed/long_caption_speed.py and bench/quality/long_captions.py: the paragraphs
timed, the accuracy with its interval, and the tables printed."""

from __future__ import annotations

import numpy as np
import pytest

from bench.quality import long_captions
from bench.speed import long_caption_speed
from capsim.metrics.sentences import split_sentences


def test_speed_paragraphs_never_repeat_a_caption(shared_data):
    if not (shared_data / "coco" / "captions_val2017.json").is_file():
        pytest.skip("COCO val2017 captions are not in ../shared/data")
    gts, res = long_caption_speed.paragraphs(300, 200, 1)  # past one pass over the images
    assert all(len(c.split()) >= 200 for (c,) in res.values())
    candidates = [s for (c,) in res.values() for s in split_sentences(c)]
    references = [s for (r,) in gts.values() for s in split_sentences(r)]
    # COCO holds a few identical captions of different images; nothing else repeats.
    assert len(set(candidates) & set(references)) < 0.01 * len(candidates)
    assert len(set(candidates)) > 0.98 * len(candidates)
    with pytest.raises(ValueError, match="repeat captions"):
        long_caption_speed.paragraphs(2000, 200, 1)


def test_accuracy_counts_ties_as_wrong_and_resamples_documents():
    scores = np.array([0.9, 0.1, 0.5, 0.5, 0.2, 0.8, 0.7, 0.6])  # right, tie, wrong, right
    value, low, high = long_captions.accuracy(scores, ["d0", "d0", "d1", "d1"])
    assert value == 50.0 and 0.0 <= low <= value <= high <= 100.0


def test_speed_table_shows_rates_ratios_and_the_load():
    row = {
        "paragraphs": 10, "words_mean": 201.0, "references": 1, "by_sentences": 10,
        "rounds": 2, "load": [1.5, 1.7],
        "seconds": {"I2CE by sentences": [0.5, 0.4], "I2CE whole": [1.0, 1.0],
                    "BLEU + CIDEr (drop-in)": [0.5, 0.5]},
        "ratios": {"I2CE by sentences": {"ratio_median": 1.1, "ratio_min": 1.0, "ratio_max": 1.2},
                   "I2CE whole": {"ratio_median": 0.5, "ratio_min": 0.5, "ratio_max": 0.5},
                   "by sentences / whole": {"ratio_median": 2.2, "ratio_min": 2.0,
                                            "ratio_max": 2.5}},
    }  # fmt: skip
    text = long_caption_speed.table(row)
    assert "| I2CE by sentences | 22 [20, 25] | 1.10 [1.00, 1.20] |" in text
    assert "load average 1.50 before, 1.70 after" in text and "2.20× the speed" in text


def test_each_round_meets_the_paragraphs_as_new_text():
    from capsim import text
    from capsim.metrics import sentences, tokenizer, word_alignment
    from i2ce_jax.scorer import I2CEScorer

    scorer = I2CEScorer.pretrained()
    scorer.score({1: ["A dog runs. Mr. Smith waves."]}, {1: ["A dog. A cat."]})
    tokenizer.ptb_tokenize({1: ["A dog runs."]})
    memos = (tokenizer._line_tokens, sentences._ends_sentence, text._tokens, word_alignment.stem)
    assert all(memo.cache_info().currsize for memo in memos) and scorer.vocab._sentences
    long_caption_speed.forget_text([scorer])
    assert not any(memo.cache_info().currsize for memo in memos) and not scorer.vocab._sentences
