"""Plots researchers read before tables (matplotlib, the optional ``[viz]`` extra).

Every function draws one figure, saves it as a PNG when ``path`` is given and
returns the matplotlib Figure, so notebooks can show it inline:

- ``metric_vs_human``: metric score against human score, one panel per metric;
- ``correlation_heatmap``: the correlations between metrics;
- ``pooling_curve``: agreement with humans for top-1 .. top-k pooling;
- ``training_curves``: loss, dev AUC and examples/s from a run's metrics.jsonl;
- ``embedding_map``: a 2-D PCA map of sentence vectors coloured by a label,
  one panel per model (grounded against text-only).

A script drawing a figure of its own takes ``pyplot()`` and ``save_figure`` from here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

JITTER = 0.12  # human scores are a few levels; spread them so the points do not stack
MAX_POINTS = 6000
PANEL_SIZE = 4.0


def pyplot() -> ModuleType:
    """matplotlib.pyplot, or an ImportError naming the extra that brings it (for a script
    that draws a figure of its own, then ``save_figure``)."""
    try:  # matplotlib picks a headless backend by itself; notebooks keep their inline one
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError("plots need matplotlib: pip install -e '.[viz]'") from error
    return plt


def save_figure(figure: Any, path: str | Path | None) -> Any:
    """Lays ``figure`` out and writes it as a PNG at ``path`` (none: not written), as every
    plot here does; returns it."""
    figure.tight_layout()
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, dpi=110)
    return figure


def metric_vs_human(
    human: np.ndarray,
    scores: Mapping[str, np.ndarray],
    path: str | Path | None = None,
    *,
    statistic: Mapping[str, float] | None = None,
    seed: int = 0,
):
    """One scatter panel per metric: its score (y) against the human score (x, jittered)."""
    plt = pyplot()
    rng = np.random.default_rng(seed)
    shown = rng.permutation(len(human))[:MAX_POINTS]
    figure, axes = plt.subplots(1, len(scores), figsize=(PANEL_SIZE * len(scores), PANEL_SIZE))
    for axis, (name, values) in zip(np.atleast_1d(axes), scores.items(), strict=True):
        x = human[shown] + rng.uniform(-JITTER, JITTER, len(shown))
        axis.scatter(x, np.asarray(values)[shown], s=4, alpha=0.25)
        title = name if statistic is None else f"{name} (τc {statistic[name]:.1f})"
        axis.set(title=title, xlabel="human score", ylabel=f"{name} score")
    return save_figure(figure, path)


def correlation_heatmap(
    matrix: np.ndarray,
    names: Sequence[str],
    path: str | Path | None = None,
    *,
    title: str = "correlation between metrics × 100",
):
    """Correlations between metrics (e.g. capsim.eval.correlation.correlation_matrix × 100)."""
    plt = pyplot()
    size = 0.55 * len(names) + 2.5
    figure, axis = plt.subplots(figsize=(size, size))
    image = axis.imshow(matrix, vmin=-100 if matrix.min() < 0 else 0, vmax=100, cmap="viridis")
    axis.set_xticks(range(len(names)), names, rotation=60, ha="right")
    axis.set_yticks(range(len(names)), names)
    for (row, column), value in np.ndenumerate(matrix):
        axis.text(column, row, f"{value:.0f}", ha="center", va="center", fontsize=7, color="w")
    figure.colorbar(image, ax=axis, shrink=0.8)
    axis.set_title(title)
    return save_figure(figure, path)


def pooling_curve(
    agreement: Mapping[str, float], path: str | Path | None = None, *, ylabel: str = "τc × 100"
):
    """Agreement with humans against the pooling (``{"max-1": 32.5, "max-2": ...}``)."""
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(PANEL_SIZE + 1, PANEL_SIZE - 1))
    axis.plot(list(agreement), list(agreement.values()), marker="o")
    axis.set(xlabel="pooling of the reference similarities", ylabel=ylabel)
    axis.grid(alpha=0.3)
    return save_figure(figure, path)


def read_metrics(path: str | Path) -> list[dict]:
    """The records of a run's metrics.jsonl."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def training_curves(metrics_jsonl: str | Path, path: str | Path | None = None):
    """Training loss, every ``dev/...`` AUC and the examples/s of a run, against the step."""
    plt = pyplot()
    records = read_metrics(metrics_jsonl)

    def series(key: str) -> tuple[list[int], list[float]]:
        pairs = [(r["step"], r[key]) for r in records if key in r]
        return [p[0] for p in pairs], [p[1] for p in pairs]

    dev_keys = sorted({k for r in records for k in r if k.endswith("_auc") and "/" in k})
    panels = [("train/loss", "training loss"), *((k, k) for k in dev_keys)]
    panels.append(("train/examples_per_second", "examples/s"))
    panels = [(key, title) for key, title in panels if series(key)[0]]  # older runs lack some
    figure, axes = plt.subplots(
        1, len(panels), figsize=(PANEL_SIZE * len(panels), PANEL_SIZE - 0.5)
    )
    for axis, (key, title) in zip(np.atleast_1d(axes), panels, strict=True):
        steps, values = series(key)
        axis.plot(steps, values, marker="." if len(steps) < 50 else None)
        axis.set(title=title, xlabel="step")
        axis.grid(alpha=0.3)
    return save_figure(figure, path)


def embedding_map(
    vectors: Mapping[str, np.ndarray],
    labels: Sequence[str],
    path: str | Path | None = None,
    *,
    title: str = "",
):
    """A 2-D PCA map of each model's sentence vectors (unit-normalised), coloured by label."""
    plt = pyplot()
    names = sorted(set(labels))
    colour_of = {name: index for index, name in enumerate(names)}
    colours = [colour_of[label] for label in labels]
    figure, axes = plt.subplots(
        1, len(vectors), figsize=(PANEL_SIZE * len(vectors), PANEL_SIZE + 0.3)
    )
    for axis, (model, matrix) in zip(np.atleast_1d(axes), vectors.items(), strict=True):
        unit = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        centred = unit - unit.mean(axis=0)
        _, _, components = np.linalg.svd(centred, full_matrices=False)
        xy = centred @ components[:2].T
        points = axis.scatter(xy[:, 0], xy[:, 1], c=colours, cmap="tab10", s=8, alpha=0.7)
        axis.set(title=model, xticks=[], yticks=[])
    handles = points.legend_elements()[0]
    figure.legend(handles, names, loc="lower center", ncol=min(len(names), 6), frameon=False)
    if title:
        figure.suptitle(title)
    figure.tight_layout(rect=(0, 0.12, 1, 1))
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, dpi=110)
    return figure
