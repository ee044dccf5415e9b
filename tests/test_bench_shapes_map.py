"""bench/quality/shapes_embedding_map.py: the colour a caption names (through either register's
synonyms) and the same-colour AUC, against hand-made captions and vectors."""

from __future__ import annotations

import numpy as np
import pytest

from bench.quality.shapes_embedding_map import colour_labels, same_colour_auc

RED, BLUE = np.array([1.0, 0.0]), np.array([0.0, 1.0])


def test_a_caption_names_one_colour_through_any_register_or_none():
    captions = ["A scarlet square.", "a crimson circle", "a red and blue square", "a square"]
    assert colour_labels(captions) == ["red", "red", None, None]


@pytest.mark.parametrize(
    ("vectors", "labels", "auc"),
    [
        ([RED, 2 * RED, BLUE, 3 * BLUE], ["red", "red", "blue", "blue"], 100.0),  # norms ignored
        ([RED, -RED, BLUE], ["red", "red", "blue"], 0.0),  # the same colour farthest apart
    ],
)
def test_same_colour_auc_ranks_same_colour_pairs_against_the_others(vectors, labels, auc):
    assert same_colour_auc(np.stack(vectors), labels) == pytest.approx(auc)
