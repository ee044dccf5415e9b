"""Bootstrap intervals and paired significance tests for caption metrics, over images.

A paper that compares captioning systems on the same images needs to know
whether a difference is noise. Each metric is reduced once to per-image rows
whose sums (or means) give its corpus score, so a resample of the images is a
weighted sum of those rows and nothing is re-tokenised or re-encoded inside the
loop:

- BLEU-1..4: clipped n-gram matches, candidate n-grams and the two lengths
  (``Bleu.statistics``); the corpus formula runs on the resample's sums.
- METEOR: the jar's 23 sufficient statistics per caption (``Meteor.statistics``),
  aggregated as its EVAL line does (``meteor.summable``).
- CIDEr-D: the per-image scores, averaged. Their document frequencies stay those
  of the full reference set: a resample does not recount them.
- ROUGE-L and I2CE: the per-image scores, averaged.

``bootstrap`` draws one set of resamples for every system (seeded), so the
intervals of all systems and the paired differences come from the same draws:

- interval: the percentile interval of the resampled scores;
- paired bootstrap p-value (as sacrebleu's): resampled differences, centred on
  their mean, at least as far from 0 as the observed difference;
- paired approximate randomization: random per-image swaps of the two systems'
  outputs whose difference is at least as large.

The draws and the p-values (count + 1 over resamples + 1) are
``capsim.metrics.resampling``'s, shared with the meta-evaluation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from capsim.metrics import resampling
from capsim.metrics.bleu import Bleu
from capsim.metrics.meteor import meteor_from_stats, summable

BLEU_KEYS = ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4")


@dataclasses.dataclass(frozen=True)
class MetricRows:
    """Per-image rows of one metric and how a set of summed rows becomes its scores."""

    keys: tuple[str, ...]
    rows: np.ndarray  # [images, d]
    score: Callable[[np.ndarray, int], np.ndarray]  # ([draws, d] sums, images) -> [draws, keys]


def _mean(sums: np.ndarray, images: int) -> np.ndarray:
    return sums / images


def _bleu(sums: np.ndarray, images: int) -> np.ndarray:
    return Bleu(len(BLEU_KEYS)).from_statistics(sums)


def _meteor(sums: np.ndarray, images: int) -> np.ndarray:
    return np.array([[meteor_from_stats(row)] for row in sums])


def bleu_rows(statistics: np.ndarray) -> MetricRows:
    """BLEU-1..4's rows: each image's clipped counts and lengths (``Bleu.statistics``)."""
    return MetricRows(BLEU_KEYS, np.asarray(statistics, dtype=np.float64), _bleu)


def meteor_rows(statistics: Sequence[Sequence[float]]) -> MetricRows:
    """METEOR's rows: each image's statistics (``Meteor.statistics``), made summable."""
    return MetricRows(("METEOR",), summable(statistics), _meteor)


def mean_rows(key: str, scores: Sequence[float]) -> MetricRows:
    """Rows of a metric whose corpus score is the mean of its per-image ``scores``."""
    return MetricRows((key,), np.asarray(scores, dtype=np.float64).reshape(-1, 1), _mean)


def _scores(metric: MetricRows, weights: np.ndarray) -> np.ndarray:
    """[draws, keys]: the metric on each weighting of the images (counts or a swap mask)."""
    return metric.score(weights @ metric.rows, metric.rows.shape[0])


def bootstrap(
    systems: Mapping[str, Sequence[MetricRows]],
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict:
    """Scores, intervals and (with two or more systems) paired tests against the first.

    Args:
        systems: a name -> its metrics' per-image rows (:class:`MetricRows`, as
            ``COCOEvalCap.metric_rows`` holds them), every system over the same images in
            the same order; the first is the one the others are compared with.
        resamples: bootstrap resamples of the images (the same draws for every system,
            so the differences are paired).
        seed: the draws' seed; the same seed gives the same report.
        confidence: the intervals' coverage.

    Returns:
        ``{"systems": {name: {metric: {score, ci_low, ci_high}}}, "comparisons": {name:
        {metric: {delta, p_value, p_value_randomization}}}}`` plus the settings.

    Raises:
        ValueError: no system, ``resamples`` < 1, ``confidence`` outside (0, 1), or
            systems over different images.
    """
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    names = list(systems)
    if not names:
        raise ValueError("bootstrap needs at least one system")
    images = {metric.rows.shape[0] for rows in systems.values() for metric in rows}
    if len(images) != 1:
        raise ValueError(f"every system and metric must cover the same images, got {images}")
    (count,) = images
    rng = np.random.default_rng(seed)
    weights = resampling.group_counts(rng, np.arange(count), resamples)
    swaps = resampling.swap_masks(rng, resamples, count).astype(np.float64)
    everything = np.ones((1, count))
    tail = (1 - confidence) / 2 * 100

    report: dict = {"systems": {}, "comparisons": {}}
    full, resampled = {}, {}
    for name in names:
        report["systems"][name] = {}
        for metric in systems[name]:
            full[name, metric.keys] = _scores(metric, everything)[0]
            resampled[name, metric.keys] = _scores(metric, weights)
            low, high = np.percentile(resampled[name, metric.keys], [tail, 100 - tail], axis=0)
            for k, key in enumerate(metric.keys):
                report["systems"][name][key] = {
                    "score": float(full[name, metric.keys][k]),
                    "ci_low": float(low[k]),
                    "ci_high": float(high[k]),
                }
    baseline = names[0]
    for name in names[1:]:
        report["comparisons"][name] = {}
        for metric, base in zip(systems[name], systems[baseline], strict=True):
            if metric.keys != base.keys:
                raise ValueError(f"{name} and {baseline} list metrics in different orders")
            delta = full[name, metric.keys] - full[baseline, metric.keys]
            differences = resampled[name, metric.keys] - resampled[baseline, metric.keys]
            bootstrap_p = resampling.paired_bootstrap_p(differences, delta)
            randomized = _randomized_differences(metric, base, swaps)
            randomization_p = resampling.two_sided_p(randomized, delta)
            for k, key in enumerate(metric.keys):
                report["comparisons"][name][key] = {
                    "delta": float(delta[k]),
                    "p_value": float(bootstrap_p[k]),
                    "p_value_randomization": float(randomization_p[k]),
                }
    report["settings"] = {
        "resamples": resamples,
        "seed": seed,
        "confidence": confidence,
        "images": count,
        "baseline": baseline,
    }
    return report


def _randomized_differences(metric: MetricRows, base: MetricRows, swaps: np.ndarray) -> np.ndarray:
    """[draws, keys]: the metric difference after swapping the two systems' outputs on the
    images where ``swaps`` is 1."""
    count = metric.rows.shape[0]
    kept = 1 - swaps
    first = metric.score(kept @ metric.rows + swaps @ base.rows, count)
    second = metric.score(kept @ base.rows + swaps @ metric.rows, count)
    return first - second


def format_report(report: dict) -> str:
    """Markdown tables: each system's scores with intervals, then the paired tests."""
    settings = report["settings"]
    percent = round(settings["confidence"] * 100)
    names = list(report["systems"])
    keys = list(report["systems"][names[0]])
    lines = [
        f"{settings['images']} images, {settings['resamples']} resamples (seed "
        f"{settings['seed']}); {percent}% bootstrap intervals over images.",
        "",
        "| metric | " + " | ".join(names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for key in keys:
        cells = [
            "{score:.4f} [{ci_low:.4f}, {ci_high:.4f}]".format(**report["systems"][n][key])
            for n in names
        ]
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    for name, tests in report["comparisons"].items():
        lines += [
            "",
            f"{name} against {settings['baseline']} (paired):",
            "",
            "| metric | delta | p (paired bootstrap) | p (approximate randomization) |",
            "|---|---:|---:|---:|",
        ]
        for key, test in tests.items():
            lines.append(
                f"| {key} | {test['delta']:+.4f} | {test['p_value']:.4f} "
                f"| {test['p_value_randomization']:.4f} |"
            )
    return "\n".join(lines)
