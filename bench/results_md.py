"""bench/RESULTS.md is shared by every bench script: each owns the sections it writes."""

from __future__ import annotations

from pathlib import Path

RESULTS_MD = Path(__file__).resolve().parent / "RESULTS.md"
HEADER = """# Benchmark results

Every table here is written by a script in `bench/`; each section names the
command that produced it. Figures are measured on this repository's CPU
machine (2 cores) unless a section says otherwise.
"""


def update_section(title: str, section: str) -> None:
    """Replaces the section headed ``title`` (a ``## `` line) with ``section``, or appends it."""
    text = RESULTS_MD.read_text() if RESULTS_MD.exists() else HEADER
    if title + "\n" in text:
        head, _, rest = text.partition(title + "\n")
        tail = rest.split("\n## ", 1)
        text = head + section + ("\n## " + tail[1] if len(tail) > 1 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    RESULTS_MD.write_text(text)
