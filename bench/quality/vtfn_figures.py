"""What bench/quality/vtfn_quality.py runs and reports: each group's models and settings, and the
rows and tables its results.json entries become."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.harness import RESULTS_DIR
from capsim.tables import format_table

RESULTS_JSON = RESULTS_DIR / "vtfn.json"
SECTION = "## VTFN"

# Text baselines see every caption of the training images; word2vec also reads
# Flickr8k train captions (the "COCO val2017 plus Flickr8k train").
ALL_CAPTIONS = "captions=all"

# model name -> (config module, extra config argument). "one" caption per image is the paper's setting.
COCO_MODELS = {
    "VTFN-BOW": ("coco_bow", "captions=one"),
    "VTFN-GRU": ("coco_gru", "captions=one"),
    "VTFN-LSTM": ("coco_lstm", "captions=one"),
    "VTFN-CNN": ("coco_cnn", "captions=one"),
    "VTFN-BOW (5 captions)": ("coco_bow", "captions=all,epochs=4"),
    "VTFN-GRU (5 captions)": ("coco_gru", "captions=all,epochs=4"),
    "VTFN-CNN (5 captions)": ("coco_cnn", "captions=all,epochs=4"),
    "VTFN-BOW+pivot": ("coco_bow", "captions=all,epochs=4,pivot=1.0"),
    "CaptionPivot": ("coco_bow", "captions=all,epochs=4,pivot=1.0,image=0.0"),
    "word2vec": ("baseline_word2vec", f"{ALL_CAPTIONS},extra_sources=flickr8k"),
    "PureTextRNN": ("baseline_pure_text_rnn", f"{ALL_CAPTIONS},epochs=4"),
    "PinModelA": ("baseline_pin_model_a", f"{ALL_CAPTIONS},epochs=4"),
    "GloVe-50d-R": ("baseline_glove_r", ALL_CAPTIONS),
    "GloVe-50d-NR": ("baseline_glove_nr", ""),
}
SHAPES_MODELS = {
    "VTFN-BOW": ("demo_bow", ""),
    "VTFN-GRU": ("demo_gru", ""),
    "VTFN-LSTM": ("demo_lstm", ""),
    "VTFN-CNN": ("demo_cnn", ""),
    "CaptionPivot": ("demo_bow", "captions=all,pivot=1.0,image=0.0"),
    "word2vec": ("baseline_word2vec", f"sources=shapes_world,{ALL_CAPTIONS}"),
    "PureTextRNN": ("baseline_pure_text_rnn", f"sources=shapes_world,{ALL_CAPTIONS}"),
    "GloVe-50d-NR": ("baseline_glove_nr", "sources=shapes_world"),
}
# §1 (issue 8): VTFN-BOW settings tried on COCO, name -> (config arguments, epoch
# multiplier), each in both caption settings at equal steps (20 epochs of one caption per
# image, 4 of all five). The choice is made on dev AUC only.
CALIBRATION_SETTINGS = {
    "default": ("lr=1e-3", 1),  # the defaults before issue 8
    "lr=3e-3": ("lr=3e-3", 1),
    "lr=1e-2": ("lr=1e-2", 1),
    "epochs x3": ("lr=1e-3", 3),
    "l2=0": ("lr=1e-3,l2=0", 1),
    "dim=256": ("lr=1e-3,dim=256", 1),
    "dim=64": ("lr=1e-3,dim=64", 1),
    "pca=80": ("lr=1e-3,pca=80", 1),
    "no decay": ("lr=1e-3,decay=1.0", 1),
    # second round, around the first round's best (lr=1e-2)
    "lr=3e-2": ("lr=3e-2", 1),
    "lr=1e-2, epochs x3": ("lr=1e-2", 3),
    "lr=1e-2, l2=0": ("lr=1e-2,l2=0", 1),
    "lr=1e-2, dim=256": ("lr=1e-2,dim=256", 1),
    "lr=1e-2, decay every 300": ("lr=1e-2,decay_steps=300", 1),
}
CAPTION_EPOCHS = {"one": 20, "all": 4}
# configs/coco_bow.py defaults to the setting with the best mean dev AUC over both caption
# settings: the COCO table's BOW rows are rerun under it.
CALIBRATED_MODELS = {n: arg for n, (module, arg) in COCO_MODELS.items() if module == "coco_bow"}

# §2: towers started from GloVe 6B 50d, every GloVe word kept (vtfn_jax.config_lib:
# glove_words=-1) and no L2, so rows no caption reaches stay at GloVe. All five captions
# per image (the pivot term needs a second caption), 4 epochs.
GLOVE = "captions=all,epochs=4,glove=package,l2=0"
GLOVE_MODELS = {
    "VTFN-BOW-GloVe (lr=1e-3)": ("coco_bow", f"{GLOVE},lr=1e-3"),
    "VTFN-BOW-GloVe (lr=3e-3)": ("coco_bow", f"{GLOVE},lr=3e-3"),
    "VTFN-BOW-GloVe (lr=1e-2)": ("coco_bow", f"{GLOVE},lr=1e-2"),
    "VTFN-GRU-GloVe": ("coco_gru", GLOVE),
    "VTFN-CNN-GloVe": ("coco_cnn", GLOVE),
    # GloVe kept as it is; only the recurrence / convolutions and W learn (BOW would be GloVe-NR)
    "VTFN-GRU-GloVe (frozen words)": ("coco_gru", f"{GLOVE},frozen_words=True"),
    "VTFN-CNN-GloVe (frozen words)": ("coco_cnn", f"{GLOVE},frozen_words=True"),
    "VTFN-BOW-GloVe+pivot (lr=1e-3)": ("coco_bow", f"{GLOVE},lr=1e-3,pivot=1.0"),
    "VTFN-BOW-GloVe+pivot (lr=1e-2)": ("coco_bow", f"{GLOVE},lr=1e-2,pivot=1.0"),
    # one caption per image (the paper's setting): the image cannot pivot between captions
    "VTFN-BOW-GloVe (one caption, lr=1e-2)": (
        "coco_bow",
        "captions=one,epochs=20,glove=package,l2=0,lr=1e-2",
    ),
    # text-only control: captions of one image pulled together, no image term
    "CaptionPivot-GloVe": ("coco_bow", f"{GLOVE},lr=1e-2,pivot=1.0,image=0.0"),
}
# The names the issue asks for: the setting each BOW variant keeps, chosen on dev AUC.
GLOVE_CHOICES = {
    "VTFN-BOW-GloVe": (
        "VTFN-BOW-GloVe (lr=1e-3)",
        "VTFN-BOW-GloVe (lr=3e-3)",
        "VTFN-BOW-GloVe (lr=1e-2)",
    ),
    "VTFN-BOW-GloVe+pivot": ("VTFN-BOW-GloVe+pivot (lr=1e-3)", "VTFN-BOW-GloVe+pivot (lr=1e-2)"),
}
GLOVE_REFERENCE = "GloVe-50d-NR"

# §3: VTFN-BOW (the calibrated coco_bow / demo_bow) and word2vec on nested fractions of the
# training images, at the full run's number of updates (epochs divided by the fraction).
FRACTIONS = (0.1, 0.25, 0.5, 1.0)
# world -> model -> (config module, argument, the epochs key and its value at fraction 1)
SCALE_MODELS = {
    "coco": {
        "VTFN-BOW": ("coco_bow", "captions=all", "epochs", 4),
        "word2vec": ("baseline_word2vec", "captions=all", "w2v_epochs", 10),
    },
    "shapes": {
        "VTFN-BOW": ("demo_bow", "captions=all", "epochs", 6),
        "word2vec": ("baseline_word2vec", "sources=shapes_world,captions=all", "w2v_epochs", 10),
    },
}
SCALE_PLOT = RESULTS_DIR / "vtfn_data_scale.png"
COCO_TRAIN_IMAGES = 82_783  # COCO train2014, not on this machine: the extrapolation's target


def calibration_arg(captions: str, setting: str) -> str:
    arg, factor = CALIBRATION_SETTINGS[setting]
    return ",".join(
        filter(None, [f"captions={captions}", f"epochs={CAPTION_EPOCHS[captions] * factor}", arg])
    )


STS_YEARS = ("STS12", "STS13", "STS14", "STS15", "STS16")
STS_KEYS = ("pearson_mean", "spearman_mean", "spearman_wmean", "spearman_all")
COCO_COLUMNS = ("same_diff_pearson", "same_diff_auc", "mrr_caption_to_image")
IMAGES_COLUMNS = ("STS14-images", "STS15-images")
ABLATION_ARG = "dataset=shapes_world,encoder=bow_sum+gru+cnn,epochs=15"  # sweep_vtfn grid
GROUP_NAMES = ("shapes", "coco", "calibration", "glove", "scale")  # --only
RESULT_KEYS = (
    "shapes_world",
    "coco_objects",
    "sts",
    "calibration",
    "sts_subsets",
    "glove_choice",
    "scale",
    "ablation",
    "runs",
)


def shapes_row(r: dict) -> dict:
    return {k: r["shapes"][k] for k in ("graded_spearman", "synonym_spearman", "same_diff_auc")}


def coco_row(r: dict) -> dict:
    retrieval = r.get("retrieval")
    return {
        "same_diff_pearson": r["same_diff"]["pearson"],
        "same_diff_auc": r["same_diff"]["auc"],
        "mrr_caption_to_image": retrieval["c2i_mrr"] if retrieval else None,
    }


def sts_row(r: dict) -> dict:
    out = {year: {k: r["sts"][year][k] for k in STS_KEYS} for year in STS_YEARS}
    out["images"] = {
        f"{year}-images": r["sts"][year]["subsets"]["images"]["spearman"]
        for year in ("STS14", "STS15")
    }
    out["avg2016"] = r["sts"]["avg2016"]
    return out


def sts_subsets_row(r: dict) -> dict:
    """Spearman of every STS subset, as ``STS14/images``."""
    return {
        f"{year}/{subset}": value["spearman"]
        for year in STS_YEARS
        for subset, value in r["sts"][year]["subsets"].items()
    }


def calibration_row(r: dict) -> dict:
    """What §1 reads: the dev AUC it chooses on, then the test figures."""
    return {
        "dev_auc": r["train"]["best_dev_same_image_auc"],
        "steps": r["train"]["steps"],
        **coco_row(r),
        **sts_row(r)["images"],
    }


def render(result: dict) -> str:
    shapes = format_table(
        [{"model": m, **row} for m, row in result["shapes_world"].items()],
        ["model", "graded_spearman", "synonym_spearman", "same_diff_auc"],
    )
    coco = format_table(
        [
            {"model": m, **row, **result["sts"].get(m, {}).get("images", {})}
            for m, row in result["coco_objects"].items()
        ],
        ["model", *COCO_COLUMNS, *IMAGES_COLUMNS],
    )
    sts = format_table(
        [
            {"model": m, **{y: r[y]["spearman_mean"] for y in STS_YEARS}, "avg2016": r["avg2016"]}
            for m, r in result["sts"].items()
        ],
        ["model", *STS_YEARS, "avg2016"],
    )
    parts = [
        f"{SECTION}\n\nCommand: `python bench/quality/vtfn_quality.py --data_dir ../shared/data "
        f"--only GROUPS` (groups: {', '.join(GROUP_NAMES)}; `--reuse` reads finished runs back). "
        "All correlations × 100. One seed a figure; the papers' tables with 5 seeds and a "
        "verdict for each claim: docs/reproduction.md.\n",
        "### Shapes world (test scenes)\n\n" + shapes + "\n",
        "### COCO val2017, object-label features (not CNN features), 500 held-out test images\n\n"
        + coco
        + "\n",
        "### STS 2012-2016, Spearman × 100 (mean over subsets per year); avg2016 is Pearson\n\n"
        + sts
        + "\n",
    ]
    if result["calibration"]:
        parts.append(render_calibration(result["calibration"]))
    if result["glove_choice"]:
        parts.append(render_glove(result))
    if result["scale"]:
        parts.append(render_scale(result["scale"]))
    if result["ablation"]:
        parts.append(
            f"### Ablation: encoder × loss on the shapes world (`{ABLATION_ARG}`)\n\n"
            + result["ablation"]["markdown"]
        )
    runs = [{"run": key, **value} for key, value in result["runs"].items()]
    parts.append("### Runs\n\n" + format_table(runs, ["run", "config", "seconds"]) + "\n")
    return "\n".join(parts)


def render_calibration(rows: dict) -> str:
    table = format_table(
        [
            {"setting": name, **rows[name]}
            for name in (f"{c}: {s}" for c in CAPTION_EPOCHS for s in CALIBRATION_SETTINGS)
            if name in rows
        ],
        ["setting", "dev_auc", "steps", *COCO_COLUMNS, *IMAGES_COLUMNS],
    )
    mean_dev = {
        setting: sum(rows[f"{c}: {setting}"]["dev_auc"] for c in CAPTION_EPOCHS)
        / len(CAPTION_EPOCHS)
        for setting in CALIBRATION_SETTINGS
        if all(f"{c}: {setting}" in rows for c in CAPTION_EPOCHS)
    }
    chosen = max(mean_dev, key=mean_dev.__getitem__)
    return (
        "### §1 Calibration of VTFN-BOW on COCO object labels (`--only calibration`)\n\n"
        "Every setting tried, in both caption settings at equal steps; chosen on dev_auc "
        "(same-image AUC of the 250 dev images) only. Best mean dev AUC over both caption "
        f"settings: **{chosen}** ({mean_dev[chosen]:.2f}), now configs/coco_bow.py's default; "
        "the COCO and STS tables' BOW rows are rerun under it.\n\n" + table + "\n"
    )


def plot_scale(rows: list[dict], path: Path) -> None:
    """One panel per measure: the value against training images (log axis), a line per model."""
    from capsim.viz import pyplot, save_figure

    plt = pyplot()
    panels = [("coco", "same_diff_auc"), ("coco", "STS14-images"), ("coco", "STS15-images"),
              ("shapes", "same_diff_auc")]  # fmt: skip
    figure, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.4))
    for axis, (world, measure) in zip(axes, panels, strict=True):
        for model in SCALE_MODELS[world]:
            points = sorted(
                (r["images"], r[measure])
                for r in rows
                if (r["world"], r["model"]) == (world, model)
            )
            axis.plot(*zip(*points, strict=True), marker="o", label=model)
        images = sorted({r["images"] for r in rows if r["world"] == world})
        axis.set(xscale="log", xlabel="training images", title=f"{world}: {measure}")
        axis.set_xticks(images, [str(n) for n in images])
        axis.minorticks_off()
        axis.grid(alpha=0.3)
    axes[0].legend()
    save_figure(figure, path)


def render_glove(result: dict) -> str:
    models = [GLOVE_REFERENCE, *GLOVE_MODELS]
    means = format_table(
        [
            {
                "model": m,
                **{y: result["sts"][m][y]["spearman_mean"] for y in STS_YEARS},
                **result["sts"][m]["images"],
                **result["coco_objects"][m],
            }
            for m in models
        ],
        ["model", *STS_YEARS, *IMAGES_COLUMNS, "same_diff_auc", "mrr_caption_to_image"],
    )
    columns = [
        GLOVE_REFERENCE,
        *GLOVE_CHOICES,
        "VTFN-GRU-GloVe",
        "VTFN-CNN-GloVe",
        "VTFN-GRU-GloVe (frozen words)",
        "VTFN-CNN-GloVe (frozen words)",
        "CaptionPivot-GloVe",
    ]
    subsets = format_table(
        [
            {"subset": key, **{m: result["sts_subsets"][m][key] for m in columns}}
            for key in result["sts_subsets"][GLOVE_REFERENCE]
        ],
        ["subset", *columns],
    )
    chosen = "; ".join(f"{n}: {c['setting']}" for n, c in result["glove_choice"].items())
    return (
        "### §2 Image-to-text transfer on top of GloVe 6B 50d (`--only glove`)\n\n"
        f"`{GLOVE}`: every GloVe word keeps a row (caption words first), rows no caption "
        "reaches stay at GloVe. Chosen on dev AUC: " + chosen + ".\n\n"
        "Spearman × 100, mean over each year's subsets; COCO same/diff and retrieval:\n\n"
        + means
        + "\n\nEvery STS subset (Spearman × 100):\n\n"
        + subsets
        + "\n"
    )


def render_scale(rows: dict) -> str:
    table = format_table(
        [{**dict.fromkeys(IMAGES_COLUMNS), **row} for row in rows.values()],
        ["world", "model", "fraction", "images", "same_diff_auc", *IMAGES_COLUMNS],
    )
    trends = format_table(
        scale_trends(list(rows.values())), ["model", "measure", "gap_per_doubling", "at_83k"]
    )
    return (
        "### §3 Results against training images (`--only scale`)\n\n"
        "Nested fractions of the training images, all five captions each, at the full run's "
        "number of updates; word2vec is trained on the same captions.\n\n"
        f"![data scale](results/{SCALE_PLOT.name})\n\n" + table + "\n\n"
        "COCO trends: a power law fitted to the gap to 100 (100 − value) against the number "
        "of images; gap_per_doubling is the factor the gap is multiplied by when the images "
        f"double, at_83k the law read at COCO's {COCO_TRAIN_IMAGES:,}-image train2014 split: "
        "an extrapolation over 4.4 doublings past the data, not a measurement.\n\n" + trends + "\n"
    )


def scale_trends(rows: list[dict]) -> list[dict]:
    """Per COCO model and measure: a power law in the gap to 100 fitted over the fractions,
    as the factor the gap is multiplied by per doubling of images and its value at 83k."""
    out = []
    for model in SCALE_MODELS["coco"]:
        points = [r for r in rows if (r["world"], r["model"]) == ("coco", model)]
        x = np.log2([r["images"] for r in points])
        for measure in ("same_diff_auc", *IMAGES_COLUMNS):
            gap = np.log2([100.0 - r[measure] for r in points])
            slope, intercept = np.polyfit(x, gap, 1)
            at = 100.0 - 2.0 ** (slope * np.log2(COCO_TRAIN_IMAGES) + intercept)
            out.append(
                {
                    "model": model,
                    "measure": measure,
                    "gap_per_doubling": float(2.0**slope),
                    "at_83k": float(at),
                }
            )
    return out
