"""Several jobs of a grid trained by one process, one after another ("members in turn").

    python -m launch.pack --train_module vtfn_jax.train --config=FILE[:ARG] JOB_DIR [JOB_DIR ...]

``launch.sweep --pack N`` starts this for up to N jobs that differ only in member keys
(``MEMBER_KEYS``: the seed, the optimizer's numbers, the loss's scalars, dropout rates).
Each member is the run its job stands for: ``train_and_evaluate`` on its own config
(the grid's config with its ``overrides.json``) and its own job folder, so its
initialisation, data order, schedule, early stopping, checkpoints, ``results.json`` and
``log.txt`` are a solo run's, and kill-and-resume, SIGTERM and the workdir lock work as
for one job. What the members share is the process: imports, the data a config
builds, JAX's compiled programs (its persistent cache is on). On this CPU a shapes-world
VTFN-BOW member takes about 2 s after the first, against 10 s for a job of its own
process (bench/RESULTS.md, "Grids on one machine").

A member that fails is recorded (its log holds the traceback) and the next one runs;
a SIGTERM saves the running member's checkpoint, as a solo run does, and ends the pack:
members not yet started have nothing to save, and the next sweep resumes them all.
Each member's results.json says how it ran, under ``"pack"``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import os
import sys
import time
import traceback
import types
from collections.abc import Iterator, Sequence
from pathlib import Path

PACK_MODE = "in turn"  # one process trains its members one after another
# Override keys whose values may differ between the members of one pack: the rest
# (encoder, sizes, loss kind, batch size, data) set a shape or a function.
MEMBER_KEYS = (
    "config.seed",
    "config.optimizer.learning_rate",
    "config.optimizer.decay_rate",
    "config.optimizer.decay_steps",
    "config.optimizer.l2",
    "config.loss.margin",
    "config.loss.temperature",
    "config.loss.alpha",
    "config.loss.weight",
    "config.loss.recon_weight",
    "config.loss.image_weight",
    "config.loss.pivot_weight",
    "config.model.dropout",
)


def load_config_module(path: str | Path) -> types.ModuleType:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"sweep config {path} does not exist")
    spec = importlib.util.spec_from_file_location(f"sweep_config_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for needed in ("get_config", "get_sweep", "TRAIN_MODULE", "METRICS"):
        if not hasattr(module, needed):
            raise AttributeError(f"sweep config {path} defines no {needed}")
    return module


def shape_of(overrides: dict[str, object]) -> str:
    """What jobs must share to be packed: their overrides but the member keys."""
    return json.dumps(
        {k: v for k, v in overrides.items() if k not in MEMBER_KEYS}, sort_keys=True, default=str
    )


@contextlib.contextmanager
def output_to(path: Path) -> Iterator[None]:
    """Standard output and error appended to ``path``: Python's streams and the file
    descriptors under them (what compiled code writes)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "a", buffering=1) as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def _record(job_dir: Path, **fields: object) -> None:
    path = job_dir / "job.json"
    record = json.loads(path.read_text()) if path.exists() else {"name": job_dir.name}
    path.write_text(json.dumps({**record, **fields}, indent=2) + "\n")


def _mark_results(job_dir: Path, members: int, index: int) -> None:
    path = job_dir / "results.json"
    results = json.loads(path.read_text())
    results["pack"] = {"mode": PACK_MODE, "members": members, "index": index}
    path.write_text(json.dumps(results, indent=1) + "\n")


def run_pack(train_module: str, config: str, job_dirs: Sequence[Path]) -> int:
    """Trains each job folder's run in turn; returns the number of failed members."""
    from capsim.cache import use_compilation_cache
    from capsim.config_lib import apply_overrides
    from capsim.logs import setup_logging

    config_file, _, arg = config.partition(":")
    module = load_config_module(config_file)
    train = importlib.import_module(train_module).train_and_evaluate
    setup_logging()
    use_compilation_cache()
    failed = 0
    for index, job_dir in enumerate(job_dirs):
        began = time.monotonic()
        print(f"[{index + 1}/{len(job_dirs)}] {job_dir.name} ({PACK_MODE})", flush=True)
        with output_to(job_dir / "log.txt"):
            print(f"member {index + 1} of {len(job_dirs)}, trained {PACK_MODE} by one process")
            try:
                member = module.get_config(arg or None)
                member.lock()
                apply_overrides(member, json.loads((job_dir / "overrides.json").read_text()))
                train(member, str(job_dir))
                returncode = 0
            except SystemExit as stop:  # a SIGTERM saved this member; the pack ends
                if stop.code:
                    raise
                _record(job_dir, seconds=round(time.monotonic() - began, 1))
                return failed
            except Exception:
                traceback.print_exc()
                returncode = 1
        if returncode == 0:
            _mark_results(job_dir, len(job_dirs), index)
        failed += returncode
        _record(job_dir, returncode=returncode, seconds=round(time.monotonic() - began, 1))
    return failed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train_module", required=True, help="e.g. vtfn_jax.train")
    parser.add_argument("--config", required=True, help="the grid's config file[:arg]")
    parser.add_argument("job_dirs", nargs="+", type=Path, help="folders with overrides.json")
    args = parser.parse_args(argv)
    return 1 if run_pack(args.train_module, args.config, args.job_dirs) else 0


if __name__ == "__main__":
    sys.exit(main())
