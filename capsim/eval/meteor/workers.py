"""METEOR on more than one core: worker processes that score a share of the captions.

The alignment search is pure Python and holds the GIL, so a thread cannot run it
beside the caller. A worker is a fresh ``python -m capsim.eval.meteor.serve``
(started, not forked: a fork of a process running JAX's threads can hang, and
multiprocessing's spawn would re-run the user's script). It loads METEOR's data
once (about 0.3 s, no JAX), then answers requests on its stdin with statistics on
its stdout, pickled, for as long as the calling process lives; its memos of
stems, synsets and phrases stay warm from call to call. It exits when its stdin
closes, which also happens when the caller dies.

A worker that fails is reported once on stderr and its share is scored in the
calling process: the statistics never depend on where they were computed.
"""

from __future__ import annotations

import atexit
import itertools
import os
import pickle
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable
from typing import IO

# A worker scores 3 parts of a call for every 2 the calling process keeps: the caller also
# runs the other metrics and an encoder's thread meanwhile. Of 1:1, 3:2, 2:1 and 3:1, 3:2
# and 2:1 gave capsim.eval.cocoeval's evaluate() on 2 cores its shortest medians (6 rounds
# on the Flickr8k-Expert files: 2.64, 2.40, 2.41 and 2.49 s).
WORKER_WEIGHT, CALLER_WEIGHT = 3, 2
Statistics = list[tuple[int, ...]]
Share = tuple[list[str], list[list[str]]]  # (candidates, their references)


class Worker:
    """One worker process and its pipes; ``send`` then ``receive`` score one share."""

    def __init__(self) -> None:
        # The child finds this process's packages where this process finds them.
        path = os.pathsep.join(p for p in sys.path if p)
        self._process = subprocess.Popen(
            [sys.executable, "-m", "capsim.eval.meteor.serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": path},
        )

    def send(self, share: Share) -> None:
        pickle.dump(share, self._process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
        self._process.stdin.flush()

    def receive(self) -> Statistics:
        status, payload = pickle.load(self._process.stdout)
        if status != "ok":
            raise RuntimeError(f"METEOR worker failed:\n{payload}")
        return payload

    def close(self) -> None:
        try:
            self._process.stdin.close()
            self._process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self._process.kill()


class Pool:
    """The process's workers, started on first use, and the sharing of one call."""

    def __init__(self) -> None:
        self._forget()
        atexit.register(self.close)
        if hasattr(os, "register_at_fork"):  # a forked child must not talk to our workers
            os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        """No workers of its own (a new pool, or a forked child, whose inherited pipes lead
        to its parent's workers: they are left to the parent, not closed)."""
        self._workers: list[Worker] = []
        self._lock = threading.Lock()
        self._broken = False

    def start(
        self, share: Share, extra_processes: int, score_here: Callable[[Share], Statistics]
    ) -> Callable[[], Statistics]:
        """``score_here`` of ``share``'s captions, begun: a part goes to each of up to
        ``extra_processes`` workers now; calling the returned function (once) scores
        the last part in this process and gathers every part, in order.

        Concurrent calls, and every call once a worker has failed, score in this
        process alone when the returned function is called.
        """
        if self._broken or extra_processes < 1 or not self._lock.acquire(blocking=False):
            return lambda: score_here(share)
        try:
            while len(self._workers) < extra_processes:
                self._workers.append(Worker())
            workers = self._workers[:extra_processes]
            parts = _split(share, [WORKER_WEIGHT] * len(workers) + [CALLER_WEIGHT])
            sent = []
            for worker, part in zip(workers, parts[:-1], strict=True):
                worker.send(part)
                sent.append(worker)
        except OSError as error:  # a worker that cannot start or read: all here
            self._fail(error)
            self._close_workers()
            self._lock.release()
            return lambda: score_here(share)
        except BaseException:
            self._lock.release()
            raise

        def gather() -> Statistics:
            try:
                here = score_here(parts[-1])
                results = [
                    self._received(worker, part, score_here)
                    for worker, part in zip(sent, parts[:-1], strict=True)
                ]
                if self._broken:
                    self._close_workers()
                return [row for result in (*results, here) for row in result]
            finally:
                self._lock.release()

        return gather

    def _received(
        self, worker: Worker, part: Share, score_here: Callable[[Share], Statistics]
    ) -> Statistics:
        """The worker's statistics, or its part scored here if it failed."""
        try:
            return worker.receive()
        except (OSError, EOFError, pickle.UnpicklingError, RuntimeError) as error:
            self._fail(error)
            return score_here(part)

    def _fail(self, error: BaseException) -> None:
        """Reported once; from then on every call scores in this process."""
        if not self._broken:
            print(f"METEOR worker failed, scoring in this process: {error}", file=sys.stderr)
        self._broken = True

    def _close_workers(self) -> None:
        for worker in self._workers:
            worker.close()
        self._workers.clear()

    def close(self) -> None:
        """Stops the workers (at exit, or to free their memory) between calls."""
        self._close_workers()


def _split(share: Share, weights: list[int]) -> list[Share]:
    """Consecutive parts of ``share``, in proportion to ``weights``."""
    candidates, references = share
    cumulative = itertools.accumulate(weights, initial=0)
    bounds = [len(candidates) * w // sum(weights) for w in cumulative]
    return [(candidates[a:b], references[a:b]) for a, b in itertools.pairwise(bounds)]


POOL = Pool()


def serve(
    requests: IO[bytes], replies: IO[bytes], statistics_of: Callable[[list, list], Statistics]
) -> None:
    """A worker's loop (capsim.eval.meteor.serve): a share in, its statistics (or the
    error) out, until its stdin closes."""
    while True:
        try:
            candidates, references = pickle.load(requests)
        except EOFError:
            return
        try:
            reply = ("ok", statistics_of(candidates, references))
        except Exception:  # the caller reports it and scores the share itself
            reply = ("error", traceback.format_exc())
        pickle.dump(reply, replies, protocol=pickle.HIGHEST_PROTOCOL)
        replies.flush()
