"""The STS harness: a model's sentence vectors against the human scores of STS 2012-2016,
STS-B and SICK-R (read by capsim.data.sts).

It takes a plain ``embed`` callable (sentences -> [N, D] vectors), scores each pair by
cosine similarity and correlates that with the human scores, so any model or baseline
can be evaluated without this module knowing about it.

Model selection follows the VTFN paper: the checkpoint with the best ``avg2016``,
the plain mean of the Pearson correlations over the STS 2016 subsets.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from scipy import stats

from capsim.data.sts import StsSubset

logger = logging.getLogger(__name__)

MODEL_SELECTION_YEAR = "STS16"
PERCENT = 100.0


def paired_cosine(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, int]:
    """Row-wise cosine similarity and the number of pairs with a zero-norm vector.

    A pair with a zero vector gets similarity 0 rather than a NaN; the caller
    logs the count so a degenerate encoder cannot hide.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    zero = norms == 0
    safe_norms = np.where(zero, 1.0, norms)
    return np.where(zero, 0.0, np.sum(a * b, axis=1) / safe_norms), int(zero.sum())


def embed_pairs(
    embed: Callable[[list[str]], np.ndarray], first: list[str], second: list[str], what: str
) -> np.ndarray:
    """Cosine similarities of sentence pairs, embedding both sides in one call."""
    vectors = np.asarray(embed(list(first) + list(second)))
    count = len(first)
    if vectors.ndim != 2 or vectors.shape[0] != 2 * count:
        raise ValueError(f"{what}: embed returned shape {vectors.shape} for {2 * count} sentences")
    if not np.all(np.isfinite(vectors)):
        raise ValueError(f"{what}: embed returned non-finite values")
    similarities, zero_pairs = paired_cosine(vectors[:count], vectors[count:])
    if zero_pairs:
        logger.warning(
            "%s: %d of %d pairs have a zero-norm embedding (similarity set to 0)",
            what,
            zero_pairs,
            count,
        )
    return similarities


def correlations_x100(similarities: np.ndarray, gold: np.ndarray, what: str) -> tuple[float, float]:
    """Pearson and Spearman x100; NaN, with a warning, where they are undefined."""
    if len(gold) < 2 or np.ptp(similarities) == 0 or np.ptp(gold) == 0:
        logger.warning("%s: correlation undefined (fewer than 2 pairs or constant input)", what)
        return math.nan, math.nan
    pearson = stats.pearsonr(similarities, gold).statistic
    spearman = stats.spearmanr(similarities, gold).statistic
    return PERCENT * float(pearson), PERCENT * float(spearman)


def evaluate_sts(
    embed: Callable[[list[str]], np.ndarray], data: Mapping[str, Sequence[StsSubset]]
) -> dict:
    """Pearson/Spearman x100 of cosine similarity against gold scores.

    Returns ``{year: {"subsets": {name: {"pearson", "spearman", "n"}},
    "pearson_mean", "pearson_wmean", "pearson_all", "spearman_mean",
    "spearman_wmean", "spearman_all", "n"}, "avg2016": float}``:
    ``mean`` averages the subsets, ``wmean`` weights them by their number of
    pairs, ``all`` correlates the concatenation of all pairs of the year.
    ``avg2016`` (mean Pearson over the STS16 subsets, the paper's model-selection
    criterion) is present only when ``data`` holds STS16.
    """
    results: dict = {}
    for year, subsets in data.items():
        per_subset: dict[str, dict] = {}
        year_similarities, year_gold = [], []
        for subset in subsets:
            what = f"{year}/{subset.name}"
            similarities = embed_pairs(embed, subset.sentences_a, subset.sentences_b, what)
            pearson, spearman = correlations_x100(similarities, subset.scores, what)
            per_subset[subset.name] = {"pearson": pearson, "spearman": spearman, "n": len(subset)}
            year_similarities.append(similarities)
            year_gold.append(subset.scores)
        sizes = np.array([entry["n"] for entry in per_subset.values()], dtype=np.float64)
        year_result: dict = {"subsets": per_subset, "n": int(sizes.sum())}
        pooled = correlations_x100(
            np.concatenate(year_similarities), np.concatenate(year_gold), year
        )
        for position, kind in enumerate(("pearson", "spearman")):
            values = np.array([entry[kind] for entry in per_subset.values()])
            year_result[f"{kind}_mean"] = float(np.mean(values))
            year_result[f"{kind}_wmean"] = float(np.sum(values * sizes) / sizes.sum())
            year_result[f"{kind}_all"] = pooled[position]
        results[year] = year_result
    if MODEL_SELECTION_YEAR in results:
        results["avg2016"] = results[MODEL_SELECTION_YEAR]["pearson_mean"]
    return results
