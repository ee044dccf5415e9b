"""Running a command line: quiet logs, a compilation cache, and bad input as one clear line."""

from __future__ import annotations

import sys
from collections.abc import Callable

from capsim.cache import use_compilation_cache
from capsim.errors import CapsimError
from capsim.logs import setup_logging


def run_command(main: Callable[[], int], prog: str) -> None:
    """Runs a command-line ``main``: quiet logs, JAX's persistent compilation cache (see
    capsim.cache), and bad input as one clear line (exit 1)."""
    setup_logging()
    use_compilation_cache()
    try:
        sys.exit(main())
    except CapsimError as error:
        sys.exit(f"{prog}: error: {error}")
