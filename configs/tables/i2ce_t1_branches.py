"""I2CE Table 1: the training corpus and the branches, against the n-gram metrics, on
caption-level correlation with human judgments (Flickr8k-Expert).

    python -m launch.sweep --config=configs/tables/i2ce_t1_branches.py --workdir=runs/i2ce_t1
    python -m launch.sweep --config=configs/tables/i2ce_t1_branches.py:scale=paper \\
        --workdir=runs/i2ce_t1_paper --cluster=slurm --gpus_per_task=1

The paper's four settings, each trained with ``seeds`` seeds (3) at its sizes (300-d word
vectors, a 512-d GRU; ``scale=here`` trains 3 epochs, ``scale=paper`` up to 8): reconstruction on COCO's train split, reconstruction on the full
corpus, the full corpus with the triplet branch, and with the margin branch. COCO only,
as the paper (no Flickr8k captions: the settled recipe of configs/i2ce_coco_*.py adds
Flickr8k's train split). The Karpathy test images stay out of every row (THumB judges
them; capsim.data.sources), so "full" is train + restval + val and "train" is
train + restval: source ``coco_train`` here, ``karpathy_splits`` at ``scale=paper``.
Early stopping on 500 images drawn from each row's own training captions. The n-gram
metrics are fixed rows (no seed), read from every job's report. The paper's figures
were lost from its text, so none stands beside ours. Arguments: ``scale`` (here, paper),
``seeds``, ``rows`` (``+``-joined, default all), the recipe's numbers and
i2ce_jax.config_lib.OPTIONS.
"""

import ml_collections

from capsim import config_lib as common
from i2ce_jax import config_lib as i2ce_common
from launch.paper_table import Claim, Table, table_grid

TRAIN_MODULE = "i2ce_jax.train"
# row -> (loss branch, the COCO training corpus)
ROWS = {
    "recon_train": ("none", "train"),
    "recon_full": ("none", "full"),
    "triplet": ("triplet", "full"),
    "margin": ("margin", "full"),
}
LABELS = {
    "recon_train": "I2CE, train split (reconstruction)",
    "recon_full": "I2CE, full corpus (reconstruction)",
    "triplet": "I2CE, full corpus + triplet (three branches)",
    "margin": "I2CE, full corpus + margin (two branches)",
    "cider": "CIDEr",
    "bleu4": "BLEU-4",
    "meteor": "METEOR",
    "rouge_l": "ROUGE-L",
}
EXPERT = "flickr8k_expert"
STATISTICS = {"Kendall tau_c": "", "Spearman": "/spearman", "Pearson": "/pearson"}
MEASURES = {column: (EXPERT, "I2CE" + suffix) for column, suffix in STATISTICS.items()}
NGRAM_METRICS = {"cider": "CIDEr", "bleu4": "BLEU-4", "meteor": "METEOR", "rouge_l": "ROUGE-L"}
KENDALL = "Kendall tau_c"
# COCO's training corpus: (here: a source; paper: the TFDS copy's Karpathy splits)
CORPORA = {
    "here": {"train": "coco_train", "full": "coco"},
    "paper": {"train": ("train", "restval"), "full": ("train", "restval", "val")},
}
SCALES = {
    "here": dict(sources="coco", epochs=3.0, seeds=3),  # 3 epochs: 12 runs in about 90 min
    "paper": dict(sources="coco_tfds", seeds=3),
}
TABLE = Table(
    title="I2CE Table 1: correlation with human judgments on Flickr8k-Expert, x 100",
    rows=tuple(ROWS),
    labels=LABELS,
    measures=MEASURES,
    fixed_rows={
        row: {column: (EXPERT, name + suffix) for column, suffix in STATISTICS.items()}
        for row, name in NGRAM_METRICS.items()
    },
    scales={
        "here": (
            "COCO val2017 captions (5 an image) less the Karpathy test images: 4,407 images in "
            "the full corpus, 3,799 in the train split (the Karpathy val images go), where the "
            "paper trains on COCO 2014's 123,287 images. 300-d word vectors, a 512-d GRU, Adam "
            "5e-4, batch 128, 3 epochs (the paper's scale: up to 8) with early stopping "
            "(patience 4) on the dev same-image AUC of 500 held-out training images, where "
            "the settled recipe (configs/i2ce_coco_*.py) adds Flickr8k's train captions and "
            "trains up to 8 epochs. Judged on Flickr8k-Expert, not "
            "on the paper's own set, which was never released."
        ),
        "paper": (
            "COCO 2014 through TFDS coco_captions (Karpathy splits; test held out), the "
            "paper's sizes 300/512, up to 8 epochs with early stopping; for a GPU or the "
            "cluster. Judged on Flickr8k-Expert: the paper's judgment set was never released."
        ),
    },
    claims=(
        Claim(
            "Reconstruction alone comes close to CIDEr (judged as reconstruction beating CIDEr: "
            "not told apart counts as close)",
            "recon_full",
            "cider",
            KENDALL,
            "section 4, Table 1",
        ),
        Claim(
            "The full corpus beats the train split (reconstruction)",
            "recon_full",
            "recon_train",
            KENDALL,
            "section 4, Table 1",
        ),
        Claim(
            "Margin (two branches) beats reconstruction alone",
            "margin",
            "recon_full",
            KENDALL,
            "section 4, Table 1",
        ),
        Claim(
            "Margin (two branches) beats triplet (three branches)",
            "margin",
            "triplet",
            KENDALL,
            "section 4, Table 1",
        ),
        *(
            Claim(
                f"I2CE with margin beats {LABELS[metric]}",
                "margin",
                metric,
                KENDALL,
                "section 4, Table 1",
            )
            for metric in NGRAM_METRICS
        ),
    ),
)
METRICS = {
    "tau_c": (EXPERT, "I2CE"),
    "cider_tau_c": (EXPERT, "CIDEr"),
    "dev_auc": ("best_dev_same_image_auc",),
    "steps": ("steps",),
}


def _parse(arg: str | None) -> ml_collections.ConfigDict:
    return common.parse_scaled_arg(
        arg,
        SCALES,
        **{**i2ce_common.OPTIONS, "flickr8k": False, "dev_sets": ""},
        embed=300,  # word vectors
        hidden=512,  # GRU state: the intrinsic vector
        init_std=1.0,  # word vectors from N(0, 1)
        lr=5e-4,  # Adam, constant
        decay=1.0,
        decay_steps=1000,
        l2=0.0,
        batch=128,
        epochs=8.0,  # with early stopping (patience 4) on the dev evaluation
        eval_every=200,
        seeds=3,
        rows="",
    )


def _row(arg: ml_collections.ConfigDict, row: str) -> ml_collections.ConfigDict:
    loss, corpus = ROWS[row]
    chosen = CORPORA[arg.scale][corpus]
    job = ml_collections.ConfigDict(arg.to_dict())
    if isinstance(chosen, str):
        job.sources = chosen
    config = i2ce_common.run(job)
    if not isinstance(chosen, str):
        config.data.karpathy_splits = chosen
    config.evals[EXPERT].include_meteor = True
    config.model = i2ce_common.autoencoder(job)
    config.loss = i2ce_common.branch(loss, arg.reduction, arg.weight)
    return i2ce_common.finish(config, job)


get_config, get_sweep, parse_table_arg = table_grid(_parse, _row, ROWS)
