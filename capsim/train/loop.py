"""The training loop shared by every model in the library.

A model-specific ``loss_fn(model, batch, key) -> (loss, metrics)`` is all a paper
package supplies. The step is a pure function over ``(graphdef, state)`` so the
jit shardings and orbax see plain pytrees; it is compiled over a 1-D data mesh
(batch sharded, parameters replicated) with the state donated.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import grain
import jax
import ml_collections
import numpy as np
import optax
from flax import nnx

from capsim.train import mesh as mesh_lib
from capsim.train.checkpoint import BEST_DIR, CHECKPOINT_DIR, Checkpointer
from capsim.train.writers import MetricWriter, Progress, save_config

# Exit status of a process that stops because a peer process died.
PEER_FAILURE_EXIT_CODE = 75  # EX_TEMPFAIL: rerunning the same command resumes

LossFn = Callable[[nnx.Module, Mapping[str, jax.Array], jax.Array], tuple[jax.Array, dict]]


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

    def summary(self) -> dict[str, Any]:
        """JSON-ready facts of the run, e.g. for results.json (best metric as ``best_dev_...``)."""
        return {
            "steps": self.step,
            "stopped_early": self.stopped_early,
            f"best_{self.metric_name.replace('/', '_')}": self.best_metric,
            "train_examples_per_second": self.examples_per_second,
        }


def steps_for_epochs(config: ml_collections.ConfigDict, num_examples: int) -> int:
    """``config.num_steps``, derived from ``num_epochs`` over ``num_examples`` when it is -1."""
    if config.num_steps < 0:
        config.num_steps = math.ceil(config.num_epochs * num_examples / config.batch_size)
    return config.num_steps


def make_optimizer(config: ml_collections.ConfigDict) -> optax.GradientTransformation:
    """Adam with exponential learning-rate decay, optional L2 and gradient clipping.

    Config keys (``config.optimizer``): learning_rate, decay_rate, decay_steps,
    l2 (coupled L2 penalty, added to the gradient as in the VTFN paper), clip_norm.
    """
    opt = config.optimizer
    schedule = optax.exponential_decay(
        opt.learning_rate, transition_steps=max(opt.decay_steps, 1), decay_rate=opt.decay_rate
    )
    parts = []
    if opt.clip_norm:
        parts.append(optax.clip_by_global_norm(opt.clip_norm))
    if opt.l2:
        parts.append(optax.add_decayed_weights(opt.l2))
    parts.append(optax.adam(schedule))
    return optax.chain(*parts)


def trainable(config: ml_collections.ConfigDict) -> nnx.filterlib.Filter:
    """The parameters training updates: all but those whose path names one of
    ``optimizer.frozen`` (e.g. ``("embed",)`` keeps pretrained word vectors as they are)."""
    frozen = tuple(config.optimizer.get("frozen", ()))
    if not frozen:
        return nnx.Param
    return nnx.All(nnx.Param, nnx.Not(nnx.Any(*(nnx.PathContains(name) for name in frozen))))


def make_train_step(
    graphdef: nnx.GraphDef,
    loss_fn: LossFn,
    mesh: jax.sharding.Mesh,
    wrt: nnx.filterlib.Filter = nnx.Param,
):
    """Compiles one optimisation step over the mesh, differentiating the ``wrt``
    parameters (the optimizer's); state is donated."""
    replicated = mesh_lib.replicated(mesh)

    def train_step(state: nnx.State, batch: Mapping[str, jax.Array], key: jax.Array):
        model, optimizer = nnx.merge(graphdef, state)
        model.train()

        def loss_of(m: nnx.Module):
            return loss_fn(m, batch, key)

        grad_fn = nnx.value_and_grad(loss_of, argnums=nnx.DiffState(0, wrt), has_aux=True)
        (loss, metrics), grads = grad_fn(model)
        optimizer.update(model, grads)
        metrics = {"loss": loss, **metrics, "grad_norm": optax.tree.norm(grads)}
        return nnx.state((model, optimizer)), metrics

    return jax.jit(
        train_step,
        in_shardings=(replicated, mesh_lib.data_sharding(mesh), replicated),
        out_shardings=(replicated, replicated),
        donate_argnums=0,
    )


@dataclasses.dataclass
class EarlyStopping:
    """Tracks the best value of ``metric`` and the evaluations since it improved.

    Its state rides in each checkpoint's metadata, so a resumed run stops
    exactly where an uninterrupted one would.
    """

    metric: str
    mode: str = "max"
    patience: int = 0  # evaluations without a gain before stopping; 0 never stops
    best: float | None = None
    evals_without_gain: int = 0

    def update(self, value: float) -> bool:
        """Records one evaluation; True when it is the best so far."""
        improved = self.best is None or (
            value > self.best if self.mode == "max" else value < self.best
        )
        if improved:
            self.best, self.evals_without_gain = value, 0
        else:
            self.evals_without_gain += 1
        return improved

    @property
    def should_stop(self) -> bool:
        return bool(self.patience) and self.evals_without_gain >= self.patience

    def meta(self) -> dict[str, Any]:
        return {"best_metric": self.best, "evals_without_gain": self.evals_without_gain}

    def restore(self, meta: Mapping[str, Any]) -> None:
        self.best = meta.get("best_metric")
        self.evals_without_gain = meta.get("evals_without_gain", 0)


class _Preemption:
    """SIGTERM (a preemption notice on TPU VMs and clusters) as a flag read at step boundaries.

    The loop then saves a checkpoint, says so and exits 0, so the same command
    resumes. Signals can only be caught on the main thread; elsewhere this is off.
    """

    def __init__(self):
        self.requested = False
        self._previous = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._request)

    def _request(self, signum: int, frame: object) -> None:
        self.requested = True

    def close(self) -> None:
        """Gives SIGTERM back to whoever handled it before the loop."""
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)


@contextlib.contextmanager
def _exit_if_a_peer_fails(checkpoints: Checkpointer) -> Iterator[None]:
    """Stops this process at once when a collective fails in a multi-process run.

    A peer that dies (SIGKILL, lost host) breaks the next all-reduce. Raising
    would leave jax's shutdown barrier waiting for the dead peer until the
    heartbeat timeout (capsim.train.mesh.HEARTBEAT_ENV) and then abort, so the
    survivor says why and exits with PEER_FAILURE_EXIT_CODE without that wait. Every
    checkpoint save has finished by then (multi-process saves are awaited), so
    rerunning the same command on every host resumes from the last one.
    """
    try:
        yield
    except jax.errors.JaxRuntimeError as error:
        if jax.process_count() == 1:
            raise
        print(
            f"process {jax.process_index()} of {jax.process_count()}: a collective failed "
            f"({str(error).splitlines()[0]}); another process of this run most likely died. "
            f"Rerun the same command on every host to resume from the last checkpoint "
            f"(step {checkpoints.latest_step()}) in {checkpoints.directory}",
            file=sys.stderr,
            flush=True,
        )
        os._exit(PEER_FAILURE_EXIT_CODE)


def _check_finite(loss: float, step: int, checkpoints: Checkpointer) -> None:
    """Stops a diverged run, naming the step and the last good checkpoint."""
    if not np.isfinite(loss):
        checkpoints.wait()
        raise FloatingPointError(
            f"loss became {loss} at step {step}; stopping. The last good "
            f"checkpoint (step {checkpoints.latest_step()}) is in "
            f"{checkpoints.directory}. Try a lower learning rate or clip_norm."
        )


def train_loop(
    config: ml_collections.ConfigDict,
    workdir: str | Path,
    model: nnx.Module,
    loss_fn: LossFn,
    train_data: grain.IterDataset,
    evaluate: PeriodicEval | None = None,
) -> TrainResult:
    """Trains ``model`` in place, resuming from ``workdir/checkpoints`` when present.

    Config keys used: seed, batch_size, num_steps, log_every, checkpoint_every,
    optimizer.* (``optimizer.frozen``: see ``trainable``), early_stopping.{metric,
    mode, patience}. With ``evaluate``, the model with the best
    ``early_stopping.metric`` is also saved to ``workdir/best``; training stops
    after ``patience`` evaluations of that metric without improvement (patience
    0 disables stopping).
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    save_config(config, workdir)
    mesh = mesh_lib.make_data_mesh()
    mesh_lib.local_batch_size(config.batch_size)  # validates divisibility early

    wrt = trainable(config)
    optimizer = nnx.Optimizer(model, make_optimizer(config), wrt=wrt)
    checkpoints = Checkpointer(workdir / CHECKPOINT_DIR, max_to_keep=2)
    every = evaluate.every if evaluate else 0
    best_checkpoints = Checkpointer(workdir / BEST_DIR, max_to_keep=1) if every else None
    data_iter: Iterator = iter(train_data)

    es = config.early_stopping
    stopping = EarlyStopping(es.metric, es.mode, es.patience)
    step = 0
    if checkpoints.latest_step() is not None:
        meta = checkpoints.restore_newest_usable(
            model=model, optimizer=optimizer, data_iterator=data_iter
        )
        step = meta["step"]
        stopping.restore(meta)
        logging.info("resumed from %s at step %d", checkpoints.directory, step)

    graphdef, state = nnx.split((model, optimizer))
    state = mesh_lib.replicate(state, mesh)
    train_step = make_train_step(graphdef, loss_fn, mesh, wrt)
    base_key = jax.random.key(config.seed)
    writer = MetricWriter(workdir, resume_step=step)
    progress = Progress(config.num_steps, per_unit=config.batch_size, first=step)
    history: list[dict[str, float]] = []
    last_loss, speeds = math.nan, []

    def sync_objects() -> None:
        """Global (replicated) arrays into the live objects, for checkpointing."""
        nnx.update((model, optimizer), state)

    def local_model() -> nnx.Module:
        """A copy of the model on this process's devices only, for host-side evaluation."""
        eval_model, _ = nnx.merge(graphdef, mesh_lib.to_local(state))
        eval_model.eval()
        return eval_model

    preemption = _Preemption()
    with _exit_if_a_peer_fails(checkpoints):
        while step < config.num_steps and not stopping.should_stop:  # a stopped run stays stopped
            batch = mesh_lib.global_batch(next(data_iter), mesh)
            state, metrics = train_step(state, batch, jax.random.fold_in(base_key, step))
            step += 1
            done = step == config.num_steps
            if step % config.log_every == 0 or done:
                scalars = {k: float(v) for k, v in mesh_lib.to_local(metrics).items()}
                last_loss = scalars["loss"]
                _check_finite(last_loss, step, checkpoints)
                speeds.append(progress.report(step, final=done, loss=last_loss))
                scalars["examples_per_second"] = speeds[-1]
                writer.write(step, {f"train/{k}": v for k, v in scalars.items()})
            results = {}
            if every and (step % every == 0 or done):
                due = evaluate.during_training(local_model(), step, done)
                results = {k: float(v) for k, v in due.items()}
            if results:
                history.append({"step": step, **results})
                writer.write(step, results)
                logging.info("step %d eval %s", step, results)
            if es.metric in results and stopping.update(results[es.metric]):
                sync_objects()
                best_checkpoints.save(step, model=model, meta={es.metric: results[es.metric]})
            preempted = preemption.requested
            if step % config.checkpoint_every == 0 or done or stopping.should_stop or preempted:
                sync_objects()
                checkpoints.save(
                    step,
                    model=model,
                    optimizer=optimizer,
                    data_iterator=data_iter,
                    meta=stopping.meta(),
                )  # written in the background while training goes on (Checkpointer.save)
            if preempted:
                checkpoints.wait()
                writer.close()
                print(
                    f"SIGTERM: saved a checkpoint at step {step} in {checkpoints.directory}; "
                    "rerun the same command to resume",
                    file=sys.stderr,
                    flush=True,
                )
                sys.exit(0)
            if stopping.should_stop:
                logging.info("early stopping at step %d: %s did not improve", step, es.metric)
                break

    preemption.close()
    nnx.update((model, optimizer), mesh_lib.to_local(state))
    model.eval()
    writer.close()
    checkpoints.close()
    if best_checkpoints:
        best_checkpoints.close()
    return TrainResult(
        step=step,
        eval_history=history,
        best_metric=stopping.best,
        stopped_early=stopping.should_stop,
        last_loss=last_loss,
        examples_per_second=float(np.median(speeds)) if speeds else math.nan,
        metric_name=es.metric,
    )
