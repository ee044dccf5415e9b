"""Training and scoring throughput against reference implementations, side by side in one run.

    python bench/throughput.py [--steps 50] [--warmup 5] [--batch_size 128]

Training: examples/s of the library's real jit-compiled step (capsim.train.loop.
make_train_step over the data mesh, set up as train_loop does) against a PyTorch
twin of the same model (bench/torch_reference.py: same sizes, same parameter
count, same loss, same optimizer, started from the same weights) for VTFN-BOW,
VTFN-GRU and I2CE with the margin branch. Both consume the same synthetic
batches (caption lengths 8-20 tokens, vocabulary 5000, 2048-d image features);
timed steps alternate between the two frameworks in rounds, after warmup
(JAX compilation excluded). Scoring: captions/s of I2CEScorer.compute_score and
of capsim's Bleu(4)+CiderD against pycocoevalcap's Bleu(4)+Cider on the same
Flickr8k-Expert candidates with 5 references each, using the packaged I2CE
model; pycocoevalcap both as users run it (Java PTBTokenizer first) and on
pre-tokenised text; ratios per round, median/min/max over ``--rounds``.

Every figure is a ratio measured on the same machine in the same process.
Writes bench/results/throughput.json and the "## Throughput" section of
bench/RESULTS.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

# configs/ is used from the clone, not installed: make the repository root importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import os

# Before torch (and its OpenMP runtime) loads. On a shared, oversubscribed CPU,
# OpenMP threads that spin-wait at every barrier make torch wait on other jobs
# (measured here: 100x slower GRU steps); sleeping waits measure the model, not
# the neighbours. An OMP_WAIT_POLICY set by the caller wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import contextlib
import dataclasses
import io
import itertools
import json
import platform
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import torch
import torch_reference
from flax import nnx, traverse_util
from pycocoevalcap.bleu.bleu import Bleu as CocoBleu
from pycocoevalcap.cider.cider import Cider as CocoCider
from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

from capsim import text
from capsim.eval.ngram import Bleu, CiderD
from capsim.train import mesh as mesh_lib
from capsim.train.loop import make_optimizer, make_train_step
from configs import i2ce_common, vtfn_common
from i2ce_jax import model as i2ce_model
from i2ce_jax.scorer import I2CEScorer
from vtfn_jax import model as vtfn_model

from results_md import update_section

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_JSON = BENCH_DIR / "results" / "throughput.json"
SECTION = "## Throughput"
GOLDEN_FILE = (
    BENCH_DIR.parents[1] / "shared" / "data" / "golden" / "pycocoevalcap_flickr8k_expert.json"
)

VOCAB_SIZE = 5000
IMAGE_DIM = 2048
# Caption lengths in tokens, <S> and </S> included; batches pad to the config's data.max_len.
MIN_TOKENS, MAX_TOKENS = 8, 20
FIRST_WORD_ID = len(text.SPECIALS)
DISTINCT_BATCHES = 4
INTERLEAVE_ROUNDS = 5
SCORING_ROUNDS = 5
SCORING_SECTION = "## Scoring throughput"
BLEU_ORDER = 4

# name -> the model's real training config.
TRAINING_MODELS: dict[str, Callable[[], ml_collections.ConfigDict]] = {
    "VTFN-BOW": lambda: vtfn_common.vtfn_config(None, encoder="bow_sum", source="files"),
    "VTFN-GRU": lambda: vtfn_common.vtfn_config(None, encoder="gru", source="files"),
    "I2CE (margin)": lambda: i2ce_common.coco_config(None, loss="margin"),
}

HostBatch = dict[str, np.ndarray]


@dataclasses.dataclass(frozen=True)
class Sizes:
    """Batch and model sizes; ``width`` shrinks every embedding/hidden size (tests)."""

    batch_size: int = 128
    vocab_size: int = VOCAB_SIZE
    image_dim: int = IMAGE_DIM
    width: int | None = None


def is_vtfn(name: str) -> bool:
    return name.startswith("VTFN")


def model_config(name: str, sizes: Sizes) -> ml_collections.ConfigDict:
    config = TRAINING_MODELS[name]()
    config.batch_size = sizes.batch_size
    if sizes.width:
        for key in ("dim", "embed_dim", "hidden_dim"):
            if key in config.model:
                config.model[key] = sizes.width
    return config


def synthetic_batches(
    name: str, config: ml_collections.ConfigDict, sizes: Sizes, seed: int = 0
) -> list[HostBatch]:
    """A few host batches shaped as the model's input pipeline yields them."""
    rng = np.random.default_rng(seed)
    batch_size, max_len = sizes.batch_size, config.data.max_len
    batches = []
    for _ in range(DISTINCT_BATCHES):
        lengths = rng.integers(MIN_TOKENS, min(MAX_TOKENS, max_len) + 1, batch_size)
        mask = np.arange(max_len)[None, :] < lengths[:, None]
        words = rng.integers(FIRST_WORD_ID, sizes.vocab_size, (batch_size, max_len))
        ids = np.where(mask, words, text.PAD_ID).astype(np.int32)
        ids[:, 0] = text.BOS_ID
        ids[np.arange(batch_size), lengths - 1] = text.EOS_ID
        if is_vtfn(name):
            features = rng.standard_normal((batch_size, sizes.image_dim), np.float32)
            group = np.arange(batch_size, dtype=np.int32)  # one caption per image, as in the paper
            batches.append({"ids": ids, "mask": mask, "features": features, "group": group})
        else:
            # Captions of the same image meet in a batch: about two per image.
            group = rng.integers(0, max(batch_size // 2, 1), batch_size).astype(np.int32)
            batches.append({"anchor_ids": ids, "anchor_mask": mask, "group": group})
    return batches


def flax_params(model: nnx.Module) -> dict[str, np.ndarray]:
    """The model's parameters as dotted paths, e.g. ``text.cell.dense_i.kernel``."""
    pure = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    return {k: np.asarray(v) for k, v in traverse_util.flatten_dict(pure, sep=".").items()}


@dataclasses.dataclass
class TrainingPair:
    """One model in both frameworks, the torch twin started from the Flax weights."""

    name: str
    config: ml_collections.ConfigDict
    jax_model: nnx.Module
    loss_fn: Callable
    torch_model: torch.nn.Module

    def parameter_counts(self) -> tuple[int, int]:
        jax_count = sum(v.size for v in flax_params(self.jax_model).values())
        return jax_count, torch_reference.count_parameters(self.torch_model)


def build_pair(name: str, sizes: Sizes) -> TrainingPair:
    config = model_config(name, sizes)
    if is_vtfn(name):
        jax_model = vtfn_model.build_model(config, sizes.vocab_size, sizes.image_dim)
        loss_fn = vtfn_model.make_loss_fn(config)
        torch_model = torch_reference.VTFNReference(config, sizes.vocab_size, sizes.image_dim)
    else:
        jax_model = i2ce_model.build_model(config, sizes.vocab_size)
        loss_fn = i2ce_model.make_loss_fn(config)
        torch_model = torch_reference.I2CEReference(config, sizes.vocab_size)
    torch_reference.copy_flax_params(torch_model, flax_params(jax_model))
    return TrainingPair(name, config, jax_model, loss_fn, torch_model)


def initial_losses(pair: TrainingPair, batch: HostBatch, seed: int = 0) -> tuple[float, float]:
    """Both losses on one batch before training, dropout off and the same permutation."""
    key = jax.random.key(seed)
    perm = np.asarray(jax.random.permutation(key, len(batch["group"])))
    pair.jax_model.eval()
    jax_batch = {k: jnp.asarray(v) for k, v in batch.items()}
    jax_loss, _ = nnx.jit(pair.loss_fn)(pair.jax_model, jax_batch, key)
    pair.jax_model.train()
    pair.torch_model.eval()
    with torch.no_grad():
        tensors = {k: torch.from_numpy(v) for k, v in batch.items()}
        torch_loss = pair.torch_model.loss(tensors, torch.tensor(perm, dtype=torch.long))
    return float(jax_loss), float(torch_loss)


class JaxRunner:
    """The library's train step, set up as capsim.train.loop.train_loop sets it up."""

    def __init__(self, pair: TrainingPair):
        config = pair.config
        self.mesh = mesh_lib.make_data_mesh()
        optimizer = nnx.Optimizer(pair.jax_model, make_optimizer(config), wrt=nnx.Param)
        graphdef, state = nnx.split((pair.jax_model, optimizer))
        self.state = mesh_lib.replicate(state, self.mesh)
        self.train_step = make_train_step(graphdef, pair.loss_fn, self.mesh)
        self.base_key = jax.random.key(config.seed)
        self.step = 0

    def __call__(self, batches: Sequence[HostBatch]) -> None:
        metrics = None
        for host_batch in batches:
            batch = mesh_lib.global_batch(host_batch, self.mesh)
            key = jax.random.fold_in(self.base_key, self.step)
            self.state, metrics = self.train_step(self.state, batch, key)
            self.step += 1
        jax.block_until_ready((self.state, metrics))


class TorchRunner:
    def __init__(self, pair: TrainingPair):
        self.trainer = torch_reference.TorchTrainer(pair.torch_model, pair.config, pair.config.seed)

    def __call__(self, batches: Sequence[HostBatch]) -> None:
        for batch in batches:
            self.trainer.step(batch)


def time_interleaved(
    runners: Mapping[str, Callable[[list], None]],
    make_chunk: Callable[[int, int], list],
    warmup: int,
    steps: int,
    rounds: int = INTERLEAVE_ROUNDS,
) -> dict[str, float]:
    """Seconds each runner spends on ``steps`` items, run in alternating rounds after warmup.

    Alternating (and swapping who goes first each round) spreads any change in
    machine load over both sides. ``make_chunk(start, count)`` gives the items.
    """
    for run in runners.values():
        run(make_chunk(0, warmup))
    rounds = max(1, min(rounds, steps))
    bounds = np.linspace(0, steps, rounds + 1).astype(int)
    elapsed = dict.fromkeys(runners, 0.0)
    names = list(runners)
    for index, (start, stop) in enumerate(itertools.pairwise(bounds)):
        chunk = make_chunk(warmup + int(start), int(stop - start))
        for name in names if index % 2 == 0 else names[::-1]:
            began = time.perf_counter()
            runners[name](chunk)
            elapsed[name] += time.perf_counter() - began
    return elapsed


def measure_training(
    name: str, *, steps: int, warmup: int, sizes: Sizes = Sizes(), rounds: int = INTERLEAVE_ROUNDS
) -> dict:
    """Training examples/s of the JAX step and the torch twin on identical batches."""
    pair = build_pair(name, sizes)
    batches = synthetic_batches(name, pair.config, sizes)
    jax_loss, torch_loss = initial_losses(pair, batches[0])
    jax_params, torch_params = pair.parameter_counts()
    runners = {"jax": JaxRunner(pair), "torch": TorchRunner(pair)}

    def make_chunk(start: int, count: int) -> list[HostBatch]:
        return [batches[i % len(batches)] for i in range(start, start + count)]

    elapsed = time_interleaved(runners, make_chunk, warmup, steps, rounds)
    examples = steps * sizes.batch_size
    jax_speed, torch_speed = examples / elapsed["jax"], examples / elapsed["torch"]
    return {
        "what": f"{name} training (examples/s)",
        "ours": jax_speed,
        "reference": torch_speed,
        "ratio": jax_speed / torch_speed,
        "jax_parameters": jax_params,
        "torch_parameters": torch_params,
        "jax_initial_loss": jax_loss,
        "torch_initial_loss": torch_loss,
    }


def load_golden_pairs(path: Path, limit: int | None) -> tuple[dict, dict]:
    """pycocoevalcap-style gts/res from the first ``limit`` rows of the golden file."""
    rows = json.loads(path.read_text(encoding="utf-8"))["rows"][:limit]
    gts = {row["key"]: list(row["references"]) for row in rows}
    res = {row["key"]: [row["candidate"]] for row in rows}
    return gts, res


def untrained_scorer(gts: Mapping, res: Mapping, width: int | None = None) -> I2CEScorer:
    """An I2CE scorer with the default model sizes and a vocabulary of these captions."""
    captions = [c for refs in gts.values() for c in refs] + [
        c for cands in res.values() for c in cands
    ]
    vocab = text.Vocab.build(text.tokenize(c) for c in captions)
    config = i2ce_common.coco_config(None, loss="margin")
    if width:
        config.model.embed_dim = config.model.hidden_dim = width
    model = i2ce_model.build_model(config, len(vocab))
    return I2CEScorer(model.encoder, vocab, pooling=config.scorer.pooling)


def _coco_bleu_cider(gts: Mapping, res: Mapping) -> None:
    with contextlib.redirect_stdout(io.StringIO()):  # pycocoevalcap prints its BLEU counts
        CocoBleu(BLEU_ORDER).compute_score(gts, res, verbose=0)
    CocoCider().compute_score(gts, res)


def _coco_as_users_run_it(gts: Mapping, res: Mapping) -> None:
    """pycocoevalcap's usual recipe: its Java PTBTokenizer on the raw text, then Bleu+Cider."""
    tokenizer = PTBTokenizer()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        gts_tok = tokenizer.tokenize({k: [{"caption": c} for c in v] for k, v in gts.items()})
        res_tok = tokenizer.tokenize({k: [{"caption": c} for c in v] for k, v in res.items()})
    _coco_bleu_cider(gts_tok, res_tok)


def _capsim_bleu_cider(gts: Mapping, res: Mapping) -> None:
    Bleu(BLEU_ORDER).compute_score(gts, res)
    CiderD().compute_score(gts, res)


def _pretokenised(captions: Mapping) -> dict:
    """The text pycocoevalcap's PTBTokenizer returns (capsim's tokenizer matches it)."""
    return {k: [" ".join(text.tokenize_for_metrics(c)) for c in v] for k, v in captions.items()}


def measure_scoring(
    gts: Mapping, res: Mapping, *, rounds: int = SCORING_ROUNDS, scorer: I2CEScorer | None = None
) -> list[dict]:
    """Captions/s of the I2CE scorer (and capsim's n-gram metrics) against pycocoevalcap.

    Each round times every scorer once on all candidates, in alternating order;
    a row's ratio is taken per round, then summarised as median, min and max.
    The warmup round compiles every length bucket the candidates need.
    """
    scorer = scorer or I2CEScorer.pretrained()
    gts_tok, res_tok = _pretokenised(gts), _pretokenised(res)
    runners = {
        "i2ce": lambda: scorer.compute_score(gts, res),
        "capsim_pretok": lambda: _capsim_bleu_cider(gts_tok, res_tok),
        "coco_pretok": lambda: _coco_bleu_cider(gts_tok, res_tok),
    }
    java = shutil.which("java") is not None
    if java:
        runners["coco_ptb"] = lambda: _coco_as_users_run_it(gts, res)
    load_start = os.getloadavg()[0]
    for run in runners.values():
        run()
    seconds: dict[str, list[float]] = {name: [] for name in runners}
    names = list(runners)
    for index in range(rounds):
        for name in names if index % 2 == 0 else names[::-1]:
            began = time.perf_counter()
            runners[name]()
            seconds[name].append(time.perf_counter() - began)
    load_end = os.getloadavg()[0]
    pairs = [
        (
            "I2CE-score-vs-coco-ptb",
            "i2ce",
            "coco_ptb",
            "I2CE scorer (packaged model, raw text) vs pycocoevalcap PTBTokenizer (Java) + Bleu(4) + Cider, as users run it",
        ),
        (
            "I2CE-score-vs-coco-pretokenised",
            "i2ce",
            "coco_pretok",
            "I2CE scorer (packaged model, raw text) vs pycocoevalcap Bleu(4) + Cider on pre-tokenised text",
        ),
        (
            "capsim-ngram-vs-coco-pretokenised",
            "capsim_pretok",
            "coco_pretok",
            "capsim Bleu(4) + CIDEr-D vs pycocoevalcap Bleu(4) + Cider, both on pre-tokenised text",
        ),
    ]
    rows = []
    for name, ours, reference, description in pairs:
        if reference not in seconds:
            print(f"{name}: skipped (no Java for pycocoevalcap's PTBTokenizer)")
            continue
        ratios = np.array(seconds[reference]) / np.array(seconds[ours])
        rows.append(
            {
                "name": name,
                "what": "score",
                "description": description,
                "ours": len(res) / float(np.median(seconds[ours])),
                "reference": len(res) / float(np.median(seconds[reference])),
                "ratio_median": float(np.median(ratios)),
                "ratio_min": float(ratios.min()),
                "ratio_max": float(ratios.max()),
                "rounds": rounds,
                "candidates": len(res),
                "load_start": load_start,
                "load_end": load_end,
            }
        )
    return rows


def scoring_table(rows: Sequence[Mapping]) -> str:
    lines = [
        "| row | ours (captions/s) | reference (captions/s) | ratio median | min | max | load start / end |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    lines += [
        f"| {r['name']} | {r['ours']:.0f} | {r['reference']:.0f} | {r['ratio_median']:.2f} | "
        f"{r['ratio_min']:.2f} | {r['ratio_max']:.2f} | {r['load_start']:.2f} / {r['load_end']:.2f} |"
        for r in rows
    ]
    return "\n".join(lines)


def write_scoring_results(command: str, rows: list[dict], model: str) -> str:
    """The "## Scoring throughput" section, and the score rows of throughput.json."""
    table = scoring_table(rows)
    descriptions = "\n".join(f"- `{r['name']}`: {r['description']}." for r in rows)
    n = rows[0]
    section = f"""{SCORING_SECTION}

Command: `{command}`

All {n["candidates"]} Flickr8k-Expert (image, candidate) pairs with their 5 references; the
I2CE model is the packaged `{model}` model, which deduplicates sentences and encodes each
once. Each of {n["rounds"]} rounds times every scorer once (alternating order) after a warmup
round; the ratio is ours / reference captions/s per round, summarised as median, min and max.
The machine is shared (2 cores): the load average at the start and the end is in the table.

{descriptions}

{table}
"""
    update_section(SCORING_SECTION, section)
    previous = json.loads(RESULTS_JSON.read_text()) if RESULTS_JSON.exists() else {"rows": []}
    kept = [
        r
        for r in previous["rows"]
        if r.get("what") != "score" and "captions/s" not in r.get("what", "")
    ]
    previous["rows"] = kept + rows
    previous["scoring_command"] = command
    RESULTS_JSON.write_text(json.dumps(previous, indent=2) + "\n")
    return table


def markdown_table(rows: Sequence[Mapping]) -> str:
    lines = ["| what | JAX (or ours) | reference | ratio |", "|---|---|---|---|"]
    lines += [
        f"| {r['what']} | {r['ours']:.1f} | {r['reference']:.1f} | {r['ratio']:.2f} |" for r in rows
    ]
    return "\n".join(lines)


def machine_facts() -> dict:
    return {
        "cpu_cores": os.cpu_count(),
        "platform": platform.platform(),
        "jax": jax.__version__,
        "jax_devices": jax.device_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ["OMP_WAIT_POLICY"],
        "load_average_at_start": os.getloadavg()[0],
    }


def write_results(command: str, settings: dict, machine: dict, rows: list[dict]) -> str:
    table = markdown_table(rows)
    training = [r for r in rows if "jax_parameters" in r]
    params = "; ".join(
        f"{r['what'].split(' training')[0]} {r['jax_parameters']:,} / {r['torch_parameters']:,}"
        for r in training
    )
    losses = "; ".join(
        f"{r['what'].split(' training')[0]} {r['jax_initial_loss']:.5f} / {r['torch_initial_loss']:.5f}"
        for r in training
    )
    m, st = machine, settings
    section = f"""{SECTION}

Command: `{command}`

- Machine: {m["cpu_cores"]} CPU cores ({m["platform"]}), shared with other jobs (load average
  {m["load_average_at_start"]:.1f} at start), so only the ratios, measured side by side in
  alternating rounds, are meaningful. JAX {m["jax"]} on {m["jax_devices"]} device; torch
  {m["torch"]} with {m["torch_threads"]} threads, OMP_WAIT_POLICY={m["omp_wait_policy"]} (see the script).
- Training: {st["steps"]} timed steps after {st["warmup"]} warmup steps (JAX compilation
  excluded), batch size {st["batch_size"]}, vocabulary {VOCAB_SIZE}, synthetic captions of
  {MIN_TOKENS}-{MAX_TOKENS} tokens padded to the config's max_len, {IMAGE_DIM}-d features. Sizes,
  loss and optimizer from configs/coco_bow.py, coco_gru.py, i2ce_coco_margin.py. JAX runs the
  library's jit-compiled `make_train_step` over the data mesh; the reference is the PyTorch twin
  in `bench/torch_reference.py` (packed GRU encoders, so PAD steps are skipped there, while the
  library's scan runs every padded step).
- Ratio = JAX (or ours) / reference; above 1 means we are faster.

{table}

Parameters, JAX / torch: {params}.
Loss on the first batch from the same weights, JAX / torch: {losses}.
"""
    update_section(SECTION, section)
    RESULTS_JSON.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(RESULTS_JSON.read_text()) if RESULTS_JSON.exists() else {"rows": []}
    scoring = [r for r in previous["rows"] if r.get("what") == "score"]
    previous.update(command=command, settings=settings, machine=machine, rows=rows + scoring)
    RESULTS_JSON.write_text(json.dumps(previous, indent=2) + "\n")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=SCORING_ROUNDS, help="scoring rounds")
    parser.add_argument("--model", default="base", help="packaged I2CE model to score with")
    parser.add_argument("--only", choices=("all", "train", "score"), default="all")
    parser.add_argument("--golden", type=Path, default=GOLDEN_FILE, help="scoring candidates")
    args = parser.parse_args()
    command = ("python bench/throughput.py " + " ".join(sys.argv[1:])).strip()
    if args.only != "train":
        if not args.golden.is_file():
            parser.error(
                f"{args.golden} does not exist (pycocoevalcap golden rows: see shared/data)"
            )
        gts, res = load_golden_pairs(args.golden, limit=None)
        rows = measure_scoring(
            gts, res, rounds=args.rounds, scorer=I2CEScorer.pretrained(args.model)
        )
        print(write_scoring_results(command, rows, args.model), flush=True)
    if args.only == "score":
        return
    torch.set_num_threads(os.cpu_count())
    machine = machine_facts()
    sizes = Sizes(batch_size=args.batch_size)
    rows = []
    for name in TRAINING_MODELS:
        row = measure_training(name, steps=args.steps, warmup=args.warmup, sizes=sizes)
        print(
            f"{name}: ratio {row['ratio']:.2f}; parameters JAX {row['jax_parameters']:,} "
            f"torch {row['torch_parameters']:,}; first-batch loss JAX {row['jax_initial_loss']:.5f} "
            f"torch {row['torch_initial_loss']:.5f}",
            flush=True,
        )
        rows.append(row)
    settings = {k: v for k, v in vars(args).items() if k in ("steps", "warmup", "batch_size")}
    print(write_results(command, settings, machine, rows))


if __name__ == "__main__":
    main()
