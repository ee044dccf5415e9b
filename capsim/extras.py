"""The JAX stack is an extra: what needs it and finds it missing says so in one line.

``pip install -e .`` brings the caption metrics alone (``capsim.metrics``: NumPy, SciPy,
numba, pycocoevalcap's METEOR data), about a third of the full install's size. Training,
the I2CE scorer and the VTFN encoders need ``pip install -e ".[jax]"``. The paper
packages call ``require_jax_stack`` when imported, so ``python -m i2ce_jax.train`` on a
metrics-only install stops at once with the install line instead of a traceback.
"""

from __future__ import annotations

import importlib.util
import sys
from types import TracebackType

JAX_EXTRA = "jax"
# Top-level modules of the [jax] extra's distributions (pyproject.toml).
JAX_STACK = (
    "jax",
    "jaxlib",
    "flax",
    "optax",
    "orbax",
    "grain",
    "array_record",
    "tensorflow_datasets",
    "ml_collections",
    "absl",
    "tensorboardX",
)


class MissingExtraError(ImportError):
    """An optional part of the install is absent; the message is the line to run."""


def missing_jax_stack() -> list[str]:
    """The modules of the [jax] extra that this environment lacks."""
    return [name for name in JAX_STACK if importlib.util.find_spec(name) is None]


def _one_line_hook(previous):
    def hook(kind: type[BaseException], error: BaseException, trace: TracebackType | None):
        if isinstance(error, MissingExtraError):
            print(f"error: {error}", file=sys.stderr)
        else:
            previous(kind, error, trace)

    hook.capsim_one_line = True
    return hook


def require_jax_stack(what: str) -> None:
    """Raises ``MissingExtraError`` naming the extra when the JAX stack is not installed.

    Uncaught at the top of a command, the error prints as one line (``error: ...``), with
    exit status 1; in Python code it is an ``ImportError`` like any other.
    """
    missing = missing_jax_stack()
    if not missing:
        return
    if not getattr(sys.excepthook, "capsim_one_line", False):
        sys.excepthook = _one_line_hook(sys.excepthook)
    raise MissingExtraError(
        f"{what} needs the JAX stack, which this install lacks ({', '.join(missing)}):"
        f' pip install -e ".[{JAX_EXTRA}]" from a clone (or "capsim[{JAX_EXTRA}]");'
        " the caption metrics alone (python -m capsim.metrics.cocoeval) need none of it"
    )
