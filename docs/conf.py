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

# Pages that include a file of the repository (bench/README.md, launch/README.md, the model
# card) keep that file's links working on the site: a link to another such file points to
# the page that includes it.
INCLUDED_PAGES = {
    "RESULTS.md": "results.md",
}


def _site_links(app, relative_path, parent_docname, content):
    """Sphinx's include-read event: rewrite an included file's links to site pages."""
    text = content[0]
    for target, page in INCLUDED_PAGES.items():
        text = text.replace(f"]({target})", f"]({page})").replace(f"]({target}#", f"]({page}#")
    content[0] = text


def setup(app):
    app.connect("include-read", _site_links)
