"""Logging for the command lines: warnings only, without the libraries' routine notices."""

from __future__ import annotations

import logging

_CHATTY_LIBRARIES = ("/orbax/", "/grain/", "/jax/", "/flax/", "/etils/")
# Orbax warns on every read-only restore that it will not create the folder,
# and on every save without an evaluation that no metrics came with it.
_ROUTINE_ORBAX_NOTICES = ("read_only=True", "directory is read only", "did not provide metrics")


class _QuietFilter(logging.Filter):
    """Drops INFO from orbax, grain and jax, and orbax's routine notices."""

    def filter(self, record: logging.LogRecord) -> bool:
        if any(notice in record.getMessage() for notice in _ROUTINE_ORBAX_NOTICES):
            return False
        return record.levelno >= logging.WARNING or not any(
            lib in record.pathname for lib in _CHATTY_LIBRARIES
        )


def setup_logging(verbose: bool = False) -> None:
    """Warnings only, without library noise; ``verbose`` shows every INFO line.

    Progress lines and result tables are printed, not logged, so they show either way.
    """
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(format="%(asctime)s %(levelname)s %(message)s")
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    for handler in root.handlers:
        for old in [f for f in handler.filters if isinstance(f, _QuietFilter)]:
            handler.removeFilter(old)
        if not verbose:
            handler.addFilter(_QuietFilter())
