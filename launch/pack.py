"""Several jobs of a grid trained by one process: a pack of members.

    python -m launch.pack --train_module vtfn_jax.train --config=FILE[:ARG] \
        [--member_mode auto|vmapped|in_turn] JOB_DIR [JOB_DIR ...]

``launch.sweep --pack N`` starts this for up to N jobs that differ only in member keys
(``launch.grid.MEMBER_KEYS``: the seed, the optimizer's numbers, the loss's scalars,
dropout rates).
Each member is the run its job stands for (capsim.train.recipe.train_and_evaluate_pack):
its own config (the grid's config with its ``overrides.json``) and job folder, so its
initialisation, data order, schedule, early stopping, checkpoints, ``results.json`` and
``log.txt`` are a solo run's, and kill-and-resume, SIGTERM and the workdir lock work as
for one job. What members share is the process: imports, the data a config builds,
the compiled step (seeds and optimizer numbers are its arguments), and, **vmapped**, one
step for all members of a program (capsim.train.members; ``programs`` decides which
share one: members that differ in a loss scalar or a dropout rate, constants of the
step, form separate programs). ``--member_mode auto`` (the default) takes what
capsim.train.members.member_mode measured faster for the backend and the model; the
pack's log names the mode taken, and each member's results.json under ``"pack"``.

In turn, a member that fails is recorded (its log holds the traceback) and the next one
runs; vmapped, an error stops the members of its program. Members whose folder already holds results.json
are skipped, so rerunning the same command (a requeued SLURM array task) resumes the
pack; a pack left with one member runs it in turn, as the solo run it is. A SIGTERM
saves the running members' checkpoints, as a solo run does, and ends the pack: the next
sweep resumes them all.
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
from collections.abc import Iterator, Sequence
from pathlib import Path

from capsim.config_lib import IN_TURN
from capsim.workdir import RESULTS_FILE
from launch.grid import LOG_FILE, add_member_mode_flag, load_config_module, update_job


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


def run_pack(
    train_module: str,
    config: str,
    job_dirs: Sequence[Path],
    mode: str = "auto",
    fit_memory: bool = False,
) -> int:
    """Trains each job folder's run as a member of a pack; returns the number that failed."""
    from capsim.cache import use_compilation_cache
    from capsim.config_lib import apply_overrides
    from capsim.logs import setup_logging
    from capsim.train.recipe import train_and_evaluate_pack

    done = [d for d in job_dirs if (d / RESULTS_FILE).exists()]
    if done:  # a rerun of the same pack (a requeued array task): finished members stay
        print(f"already done, skipped: {', '.join(d.name for d in done)}", flush=True)
    job_dirs = [d for d in job_dirs if d not in done]
    if not job_dirs:
        return 0
    if len(job_dirs) == 1:
        mode = IN_TURN  # one member is a solo run, to the bit
    config_file, _, arg = config.partition(":")
    module = load_config_module(config_file)
    declare = importlib.import_module(train_module).declare
    setup_logging()
    use_compilation_cache()
    configs = []
    for job_dir in job_dirs:
        member = module.get_config(arg or None)
        member.lock()
        apply_overrides(member, json.loads((job_dir / "overrides.json").read_text()))
        configs.append(member)
    began, failed, recorded = time.monotonic(), 0, set()

    def record(index: int, outcome: object) -> None:
        nonlocal failed
        returncode = int(isinstance(outcome, Exception))
        failed += returncode
        recorded.add(index)
        seconds = round(time.monotonic() - began, 1)
        update_job(job_dirs[index], returncode=returncode, seconds=seconds)

    try:
        train_and_evaluate_pack(
            configs,
            [str(d) for d in job_dirs],
            declare,
            mode,
            lambda index: output_to(job_dirs[index] / LOG_FILE),
            record,
            fit_memory,
        )
    except SystemExit as stop:  # a SIGTERM saved the members; the pack ends
        if stop.code:
            raise
    except Exception as error:  # before any member trained (a config refused): all stop
        for index, job_dir in enumerate(job_dirs):
            if index not in recorded:
                with output_to(job_dir / LOG_FILE):
                    traceback.print_exception(error)
                record(index, error)
    return failed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train_module", required=True, help="e.g. vtfn_jax.train")
    parser.add_argument("--config", required=True, help="the grid's config file[:arg]")
    add_member_mode_flag(parser)
    parser.add_argument(
        "--fit_memory",
        action="store_true",
        help="vmapped members that do not fit in memory train as programs of as many as fit "
        "(launch.sweep --pack auto), instead of stopping with the sizes",
    )
    parser.add_argument("job_dirs", nargs="+", type=Path, help="folders with overrides.json")
    args = parser.parse_args(argv)
    failed = run_pack(
        args.train_module, args.config, args.job_dirs, args.member_mode, args.fit_memory
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
