"""Sphinx configuration of the manual: MyST markdown pages, an API reference from docstrings.

Build it (no network needed; the docs extra brings what it needs)::

    pip install -e ".[docs]"
    python -m sphinx -W --keep-going -n -b html docs docs/_build/html

``-W --keep-going -n`` is CI's strict build: a broken link, a missing reference or an API
page whose module fails to import fails it. Nothing here reaches the network at build time:
no intersphinx inventories, and the theme's assets ship in its wheel.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
# launch/ and bench/ are used from a clone and not installed: the reference imports them
# from the repository root, as `python -m launch.sweep` does.
sys.path.insert(0, str(ROOT))
# Importing the API's modules must not start anything heavy or noisy.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

project = "capsim"
author = "the capsim authors"
copyright = "the capsim authors, Apache-2.0"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# MyST: headings get anchors (links such as scoring.md#command-line are checked), $ math,
# ::: fences for directives.
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist"]

# The API reference: Google-style docstrings (Args/Returns/Raises), members in source order.
autodoc_default_options = {"members": True, "member-order": "bysource"}
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autoclass_content = "both"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

# -n checks every cross-reference. Our own (capsim, vtfn_jax, i2ce_jax, launch) must resolve;
# other libraries' names (numpy, jax, flax, the standard library) are not checked, because
# checking them needs intersphinx inventories from the network.
nitpick_ignore_regex = [(r"py:.*", r"(?!(capsim|vtfn_jax|i2ce_jax|launch)\b).*")]

html_theme = "furo"
html_title = "capsim"
html_static_path: list[str] = []

# METEOR's compiled batch is internal: named by a signature, documented in its module.
nitpick_ignore = [("py:class", "capsim.metrics.meteor.matching.Batch")]

# Files of the repository that the site shows as pages of its own (they include them). A
# link to one of them, from a page of docs/ (``../bench/RESULTS.md``, right on GitHub) or
# from an included file (bench/README.md's ``RESULTS.md``), points to its page on the site.
SITE_PAGES = {
    "bench/RESULTS.md": "results.md",
    "bench/README.md": "benchmarks.md",
    "launch/README.md": "launchers.md",
    "i2ce_jax/pretrained/MODEL_CARD.md": "model_card.md",
}
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _site_links(text: str, base: Path, page_dir: Path) -> str:
    """``text``'s links to SITE_PAGES' files (relative to ``base``) made relative links to
    their pages from ``page_dir``; any other link is left as it is."""

    def site_link(match: re.Match) -> str:
        path, hash_, anchor = match.group(1).partition("#")
        if not path or re.match(r"[a-z]+:", path):
            return match.group(0)
        try:
            in_repo = Path(os.path.normpath(base / path)).relative_to(ROOT).as_posix()
        except ValueError:  # outside the repository
            return match.group(0)
        if in_repo not in SITE_PAGES:
            return match.group(0)
        page = os.path.relpath(DOCS / SITE_PAGES[in_repo], page_dir)
        return f"]({Path(page).as_posix()}{hash_}{anchor})"

    return _LINK.sub(site_link, text)


def _page_links(app, docname, source):
    """Sphinx's source-read event: a page's links to SITE_PAGES' files."""
    page_dir = (DOCS / docname).parent
    source[0] = _site_links(source[0], page_dir, page_dir)


def _included_links(app, relative_path, parent_docname, content):
    """Sphinx's include-read event: an included file's links to SITE_PAGES' files."""
    base = (Path(app.srcdir) / relative_path).parent
    content[0] = _site_links(content[0], base, (DOCS / parent_docname).parent)


def setup(app):
    app.connect("source-read", _page_links)
    app.connect("include-read", _included_links)
