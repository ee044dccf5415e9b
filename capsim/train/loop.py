"""The training loop of ``Trainer.fit``: resume, step, log, evaluate, checkpoint, stop.

``Run`` is one run's part of a call of ``capsim.train.trainer.Trainer.fit`` (the compiled
step and the state it owns stay in the Trainer): metrics rows and the progress line,
dev evaluations ranked by ``early_stopping.metric`` (orbax keeps the best step;
capsim.train.checkpoint), early stopping. ``train_runs`` is the loop: it steps one run,
or a pack's members (capsim.train.members) together, with preemption and lost peers
(capsim.train.faults) and an optional profiler trace. ``TrainResult`` is what a run returns.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import jax
import numpy as np
from flax import nnx

from capsim.checkpoints import LEGACY_BEST_DIR
from capsim.errors import CheckpointError, UnusableCheckpointsError
from capsim.progress import Progress
from capsim.train.checkpoint import Checkpointer, selection_metrics
from capsim.train.faults import Preemption, exit_on_failure
from capsim.train.metrics import MetricWriter, logged_values
from capsim.train.profile import StepTrace
from capsim.workdir import CHECKPOINT_DIR, PROFILE_DIR, move_run_aside, save_config


class PeriodicEval(Protocol):
    """What the loop evaluates during training (capsim.eval.evaluators.Evaluators is one).

    ``every``: steps between evaluations; ``during_training`` returns the numbers due
    at ``step`` (``last`` is the final step), keyed like ``"dev/same_image_auc"``.
    """

    every: int

    def during_training(self, model: nnx.Module, step: int, last: bool) -> Mapping[str, float]: ...


@dataclasses.dataclass
class TrainResult:
    """What a run did: the final step, its eval history and why it stopped."""

    step: int
    eval_history: list[dict[str, float]]
    best_metric: float | None
    stopped_early: bool
    last_loss: float
    examples_per_second: float
    metric_name: str
    input_path: str | None = None  # where table rows were gathered (capsim.data.device_tables)

    def summary(self) -> dict[str, Any]:
        """JSON-ready facts of the run, e.g. for results.json (best metric as ``best_dev_...``)."""
        return {
            "steps": self.step,
            "stopped_early": self.stopped_early,
            f"best_{self.metric_name.replace('/', '_')}": self.best_metric,
            "train_examples_per_second": self.examples_per_second,
            "input_path": self.input_path,
        }


class Run:
    """One run of ``Trainer.fit`` (or one member of a pack): its checkpoints, metrics and
    evaluations, and the hooks ``train_runs`` calls around its steps.

    ``trainer`` is a ``Trainer`` or what stands for one (capsim.train.members.PackMember):
    its config, ``train_objects``/``place_objects`` (the state as objects a checkpoint
    saves or restores into), ``keep_trained``, ``device_batches``, ``host_metrics``,
    ``local_model`` and ``input_path``.
    """

    def __init__(self, trainer: Any, workdir: Path, train_data, evaluate):
        config = trainer.config
        if (workdir / LEGACY_BEST_DIR).is_dir():
            raise CheckpointError(
                f"{workdir} was written by an older version that kept its best model apart in "
                f"{workdir / LEGACY_BEST_DIR}; scorers still read it, but training now keeps "
                f"the best step in {workdir / CHECKPOINT_DIR}. To train on, move the folder away "
                f"(mv {workdir / LEGACY_BEST_DIR} {workdir}/best.old): the run resumes from "
                f"{CHECKPOINT_DIR}/ and early stopping counts again from the next evaluation"
            )
        self.trainer, self.config, self.workdir = trainer, config, workdir
        self.evaluate = evaluate
        self.every = evaluate.every if evaluate else 0
        self.stopping = config.early_stopping
        self.data_iter = iter(train_data)
        try:
            self.step = self._resume()
        except UnusableCheckpointsError as error:
            if not config.get("start_over", False):
                raise
            kept = move_run_aside(workdir)
            logging.warning(
                "%s\nstart_over: moved the old run to %s; training from step 0", error, kept
            )
            self.step = self._resume()
        save_config(config, workdir)
        self.first_step = self.step

    def _resume(self) -> int:
        """Opens the checkpoints and restores the newest usable one; returns its step (0: none)."""
        self.checkpoints = Checkpointer(
            self.workdir / CHECKPOINT_DIR, keep=2, save_every=self.config.checkpoint_every
        )
        if not self.checkpoints.holds_checkpoints():
            return 0
        model, optimizer = self.trainer.train_objects()
        try:
            step = self.checkpoints.restore_newest_usable(
                model=model, optimizer=optimizer, data_iterator=self.data_iter
            )["step"]
        except UnusableCheckpointsError:
            self.checkpoints.close()  # before start_over moves its folder
            raise
        self.trainer.place_objects(model, optimizer)
        logging.info("resumed from %s at step %d", self.checkpoints.directory, step)
        return step

    # Early stopping, read from orbax's bookkeeping of the evaluated checkpoints.
    def best_value(self) -> float | None:
        best = self.checkpoints.best_step()
        return None if best is None else self.checkpoints.metrics(best)[self.stopping.metric]

    def should_stop(self) -> bool:
        """``patience`` evaluations (every ``every`` steps) since orbax's best step."""
        best = self.checkpoints.best_step()
        if not (self.stopping.patience and self.every) or best is None:
            return False
        return self.step // self.every - best // self.every >= self.stopping.patience

    def describe_checkpoint(self) -> str:
        latest = self.checkpoints.latest_step()
        return f"the last checkpoint (step {latest}) in {self.checkpoints.directory}"

    def _check_finite(self, loss: float) -> None:
        """Stops a diverged run, naming the step and the last good checkpoint."""
        if not np.isfinite(loss):
            self.checkpoints.wait()
            raise FloatingPointError(
                f"loss became {loss} at step {self.step}; stopping. The last good "
                f"checkpoint (step {self.checkpoints.latest_step()}) is in "
                f"{self.checkpoints.directory}. Try a lower learning rate or clip_norm."
            )

    def active(self) -> bool:
        """Whether a step is left to train: a stopped run stays stopped."""
        return self.step < self.config.num_steps and not self.should_stop()

    def loop(self) -> TrainResult:
        """Trains until ``active()`` ends (``train_runs`` of this run alone)."""
        (result,) = train_runs([self], lambda batches, active: self.trainer.step(batches[0]))
        return result

    def begin(self) -> None:
        """What the steps write to: metrics rows, the progress line, the eval history."""
        config = self.config
        self.writer = MetricWriter(self.workdir, resume_step=self.step)
        self.progress = Progress(config.num_steps, per_unit=config.batch_size, first=self.step)
        self.history: list[dict[str, float]] = []
        self.last_loss, self.speeds, self.waited = math.nan, [], 0.0

    def after_step(
        self, metrics: Mapping[str, Any], data_state: Mapping, seconds: float, preempted: bool
    ) -> None:
        """The hooks after a step: log, evaluate, checkpoint (forced at a preemption)."""
        trainer, config, metric = self.trainer, self.config, self.stopping.metric
        self.waited += seconds
        self.step += 1
        done = self.step == config.num_steps
        if self.step % config.log_every == 0 or done:
            scalars = trainer.host_metrics(metrics)
            self.last_loss = scalars["loss"]
            self._check_finite(self.last_loss)
            self.speeds.append(
                self.progress.report(
                    self.step, final=done, input_wait_s=self.waited, loss=self.last_loss
                )
            )
            self.waited = 0.0
            scalars["examples_per_second"] = self.speeds[-1]
            self.writer.write(self.step, {f"train/{k}": v for k, v in scalars.items()})
        results = {}
        if self.every and (self.step % self.every == 0 or done):
            due = self.evaluate.during_training(trainer.local_model(), self.step, done)
            results = {k: float(v) for k, v in due.items()}
        if results:
            self.history.append({"step": self.step, **results})
            self.writer.write(self.step, results)
            logging.info("step %d eval %s", self.step, results)
        evaluated = metric in results
        if preempted:
            print(
                f"process {jax.process_index()}: preemption notice (SIGTERM): stopping "
                f"at step {self.step}, the step every process agreed on; saving",
                file=sys.stderr,
                flush=True,
            )
        # Forced saves: evaluations (ranked for the best step), the last step and a
        # preemption; orbax's policy adds its interval.
        if evaluated or done or preempted or self.checkpoints.should_save(self.step):
            model, optimizer = trainer.train_objects()
            self.checkpoints.save(
                self.step,
                model=model,
                optimizer=optimizer,
                data_state=data_state,
                metrics=selection_metrics(metric, results[metric], self.stopping.mode)
                if evaluated
                else None,
                force=True,
            )  # written in the background while training goes on (Checkpointer.save)
        if self.should_stop():
            logging.info("early stopping at step %d: %s did not improve", self.step, metric)

    def finish(self) -> TrainResult:
        """The trained state back in the live model, the files closed, the run's facts."""
        trainer = self.trainer
        speeds = self.speeds
        if self.step == self.first_step:
            logging.warning(
                "nothing left to train: the run in %s had reached step %d%s; its speed below "
                "is the one it logged",
                self.workdir,
                self.step,
                " and stopped early" if self.should_stop() else "",
            )
            speeds = logged_values(self.workdir, "train/examples_per_second")
        trainer.keep_trained()
        self.writer.close()
        best, stopped_early = self.best_value(), self.should_stop()
        self.checkpoints.close()
        return TrainResult(
            step=self.step,
            eval_history=self.history,
            best_metric=best,
            stopped_early=stopped_early,
            last_loss=self.last_loss,
            examples_per_second=float(np.median(speeds)) if speeds else math.nan,
            metric_name=self.stopping.metric,
            input_path=trainer.input_path.name,
        )

    def close(self) -> None:
        """Closes its files without finishing (nothing was trained)."""
        self.writer.close()
        self.checkpoints.close()

    def stop_preempted(self) -> None:
        """After a preemption's save: waits for it and says how to resume (the caller exits)."""
        self.checkpoints.wait()
        self.writer.close()
        print(
            f"process {jax.process_index()}: preempted (SIGTERM); saved a checkpoint at step "
            f"{self.step} in {self.checkpoints.directory}; rerun the same command to resume",
            file=sys.stderr,
            flush=True,
        )


def train_runs(
    runs: Sequence[Run],
    step: Callable[[list[dict], np.ndarray], Mapping[str, Any]],
    output: Callable[[int], contextlib.AbstractContextManager] | None = None,
) -> list[TrainResult]:
    """The training loop: steps the runs together until none is ``active()``, then
    returns each one's TrainResult; a preemption saves them all and exits 0.

    ``step(batches, active)`` trains one step of the runs marked ``active`` on their
    global batches (a stopped run's slot holds another run's batch, to be ignored) and
    returns the step's metrics: ``Trainer.step`` for one run, ``PackTrainer.step`` for a
    pack's members. ``output(k)`` (optional) is entered around what run k prints. The
    profiler traces ``profile_steps`` of the first run's config into its workdir.
    """
    output = output or (lambda index: contextlib.nullcontext())
    for index, run in enumerate(runs):
        with output(index):
            run.begin()
    first = runs[0]
    feeds = [run.trainer.device_batches(run.data_iter) for run in runs]
    preemption = Preemption(first.checkpoints.reached_preemption)
    trace = StepTrace(first.config.get("profile_steps", ""), first.workdir / PROFILE_DIR)
    try:
        with exit_on_failure(lambda: ", ".join(run.describe_checkpoint() for run in runs)):
            while any(run.active() for run in runs):
                active = np.array([run.active() for run in runs])
                done = max(run.step for run, on in zip(runs, active, strict=True) if on)
                taken = [next(feed) if on else None for feed, on in zip(feeds, active, strict=True)]
                spare = next(item[0] for item in taken if item is not None)
                batches = [spare if item is None else item[0] for item in taken]
                trace.before_step(done)
                with jax.profiler.StepTraceAnnotation("train", step_num=done + 1):
                    metrics = step(batches, active)
                trace.after_step(done + 1, metrics)
                preempted = preemption.reached(done + 1)  # every step, every process
                for index in np.flatnonzero(active):
                    _, data_state, seconds = taken[index]
                    with output(index):
                        runs[index].after_step(metrics, data_state, seconds, preempted)
                if preempted:
                    for index, run in enumerate(runs):
                        with output(index):
                            run.stop_preempted()
                    sys.exit(0)
    finally:
        for feed in feeds:  # their placing threads stop before anything else uses the iterators
            feed.close()
        preemption.close()  # SIGTERM back to its previous handler, however the loop ends
    results = []
    for index, run in enumerate(runs):
        with output(index):
            results.append(run.finish())
    return results
