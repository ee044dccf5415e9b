"""docs/architecture.md against the tree: every file it names exists, and its layout names
every module of the shared core, of the trainer, of the bench (and each of its folders) and
of the tools. bench/README.md against bench/: a few doors at the top, every folder's purpose
and every runnable bench or tool named. README.md as a landing page (at most 250 lines, with
the install, the main job and the test command, its links alive), and the manual's strict
Sphinx build failing on a planted broken link (the docs extra, ``-m docs``)."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ARCHITECTURE = REPO / "docs" / "architecture.md"
FILE_NAME = re.compile(r"(?<![\w.])[\w/]+\.(?:py|md|txt|ipynb)\b")
SKIPPED = {".venv", ".git", "node_modules"}
# Named in the docs but not files of the repository: a placeholder, and a file a command
# writes into a workdir.
NOT_FILES = {"bench/NAME.py", "bench/FOLDER/NAME.py", "tools/NAME.py", "report.md"}


def _repository_files() -> list[Path]:
    return [
        path
        for path in REPO.rglob("*")
        if path.is_file() and not SKIPPED & set(path.relative_to(REPO).parts)
    ]


def _code_blocks(text: str) -> list[str]:
    return re.findall(r"```\n(.*?)```", text, flags=re.DOTALL)


def test_every_file_the_architecture_names_exists():
    files = [path.relative_to(REPO).as_posix() for path in _repository_files()]
    names = set(FILE_NAME.findall(ARCHITECTURE.read_text(encoding="utf-8"))) - NOT_FILES
    missing = sorted(
        name for name in names if not any(f == name or f.endswith("/" + name) for f in files)
    )
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"


def test_the_layout_names_every_core_module_package_and_bench_module():
    blocks = _code_blocks(ARCHITECTURE.read_text(encoding="utf-8"))
    layout, bench = blocks[0], next(block for block in blocks if "\nbench/\n" in block)
    core = REPO / "capsim"
    wanted = {
        layout: [
            *(p.name for p in core.glob("*.py") if p.name != "__init__.py"),
            *(p.name for p in (core / "train").glob("*.py") if p.name != "__init__.py"),
            *(p.parent.name + "/" for p in core.glob("*/**/__init__.py")),
        ],
        bench: [
            *(p.name for p in (REPO / "bench").rglob("*.py") if p.name != "__init__.py"),
            *(f"\n  {p.parent.name}/ " for p in (REPO / "bench").glob("*/__init__.py")),
            *(p.name for p in (REPO / "tools").glob("*.py") if p.name != "__init__.py"),
        ],
    }
    missing = sorted(name for block, names in wanted.items() for name in names if name not in block)
    assert not missing, f"docs/architecture.md's layout does not name: {missing}"


BENCH = REPO / "bench"
BENCH_README = BENCH / "README.md"
DOORS = {"__init__.py", "throughput.py", "accelerator_check.py"}
MAX_TOP_LEVEL = 6  # the doors and at most three shared modules


def test_bench_keeps_its_doors_at_the_top_and_names_each_folder_and_runnable_script():
    top = {path.name for path in BENCH.glob("*.py")}
    assert top >= DOORS and len(top) <= MAX_TOP_LEVEL, sorted(top)
    readme = BENCH_README.read_text(encoding="utf-8")
    folders = sorted(path.parent.name for path in BENCH.glob("*/__init__.py"))
    assert folders and all(f"| `{folder}/` |" in readme for folder in folders), folders
    runnable = sorted(
        path.relative_to(REPO).as_posix()
        for path in [*BENCH.rglob("*.py"), *(REPO / "tools").glob("*.py")]
        if 'if __name__ == "__main__":' in path.read_text(encoding="utf-8")
    )
    unnamed = [script for script in runnable if f"`python {script}" not in readme]
    assert len(runnable) > 20 and not unnamed, unnamed


# ---------------------------------------------------------------- the README and the manual
README = REPO / "README.md"
DOCS = REPO / "docs"
README_MAX_LINES = 250
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_is_a_landing_page_with_install_main_job_and_test_command():
    text = README.read_text(encoding="utf-8")
    lines = text.count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; the manual is docs/"
    for command in (
        'pip install -e ".[all]"',  # the install CI runs
        "python -m vtfn_jax.train --config=configs/demo_bow.py",  # the main job
        "python -m pytest -q\n",  # the test command CI runs (the fast tier)
        "python -m sphinx -b html docs docs/_build/html",  # the manual, offline
    ):
        assert command in text, command


def test_every_relative_link_of_the_readme_names_a_file_or_heading_that_exists():
    text = README.read_text(encoding="utf-8")
    anchors = {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.*)$", text, flags=re.MULTILINE)
    }
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # a URL: not followed here
        path, _, anchor = target.partition("#")
        if (path and not (REPO / path).exists()) or (not path and anchor not in anchors):
            broken.append(target)
    assert not broken, f"README.md links to what does not exist: {broken}"
    assert any(t.startswith("docs/") for t in LINK.findall(text)), "the README links the manual"


def test_every_page_of_the_manual_is_markdown_under_docs():
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if "_build" not in p.parts}
    assert {"index.md", "architecture.md", "shapes_world.md", "api/index.md"} <= pages, pages


# The manual's strict build, as CI runs it (.ci/run): a copy of docs/ with a broken page link,
# a broken heading anchor and a reference to an API function that does not exist must each
# fail it, and nothing else may.
STRICT_BUILD = ("-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html")
PLANTED = (
    "[a page that is not there](no_such_page.md)",
    "[a heading that is not there](scoring.md#no-such-heading)",
    "{py:func}`capsim.metrics.no_such_function`",
)
needs_sphinx = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("sphinx", "myst_parser")),
    reason="needs sphinx and myst_parser (pip install -e '.[docs]')",
)


@pytest.mark.slow  # one full build of the site, autodoc importing the API: about half a minute
@pytest.mark.docs
@needs_sphinx
def test_a_planted_broken_link_fails_the_strict_build(tmp_path):
    root = tmp_path / "clone"  # the working tree as it is (about 20 MB), to plant in
    ignored = shutil.ignore_patterns(".git", ".venv*", "_build", "__pycache__", "*.egg-info")
    shutil.copytree(REPO, root, ignore=ignored)
    page = root / "docs" / "scoring.md"
    page.write_text(
        page.read_text(encoding="utf-8") + "\n\n" + "\n\n".join(PLANTED) + "\n", encoding="utf-8"
    )
    done = subprocess.run(
        [sys.executable, *STRICT_BUILD, str(root / "docs"), str(tmp_path / "html")],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode != 0, "the strict build passed with broken links planted"
    warnings = [line for line in done.stderr.splitlines() if "WARNING" in line or "ERROR" in line]
    for planted in ("no_such_page.md", "no-such-heading", "capsim.metrics.no_such_function"):
        assert any(planted in line for line in warnings), (planted, done.stderr[-3000:])
    others = [line for line in warnings if "scoring.md" not in line]
    assert not others, f"the manual fails its strict build without the planted links: {others}"


# The API reference's examples run as doctests: every module the reference documents whose
# docstrings hold a ``>>>`` example (the cheap ones; examples that need a trained run or a
# download are shown as code, not doctests).
API_PAGES = sorted((DOCS / "api").glob("*.md"))
DOCUMENTED = re.compile(r"^\.\. auto(?:module|class|function|exception):: ([\w.]+)", re.MULTILINE)


def _documented_modules() -> list[str]:
    modules = set()
    for page in API_PAGES:
        for name in DOCUMENTED.findall(page.read_text(encoding="utf-8")):
            parts = name.split(".")
            while parts and not (
                (REPO.joinpath(*parts).with_suffix(".py")).is_file()
                or (REPO.joinpath(*parts) / "__init__.py").is_file()
            ):
                parts.pop()
            modules.add(".".join(parts))
    return sorted(modules)


def _module_source(module: str) -> str:
    base = REPO.joinpath(*module.split("."))
    path = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
    return path.read_text(encoding="utf-8")


DOCTESTED = [module for module in _documented_modules() if ">>> " in _module_source(module)]


def test_the_api_reference_documents_the_public_api():
    wanted = {
        "capsim.metrics.cocoeval",
        "capsim.metrics.tokenizer",
        "capsim.metrics.bleu",
        "capsim.metrics.meteor",
        "capsim.metaeval",
        "i2ce_jax.scorer",
        "vtfn_jax.sentence_encoder",
        "vtfn_jax.train",
        "i2ce_jax.train",
        "launch.sweep",
    }
    assert wanted <= set(_documented_modules()), wanted - set(_documented_modules())
    assert {"capsim.metrics.bleu", "capsim.metrics.cider"} <= set(DOCTESTED), DOCTESTED


@pytest.mark.parametrize("module", DOCTESTED)
def test_the_api_reference_examples_run_as_doctests(module):
    from capsim.extras import missing_jax_stack

    if module.split(".")[0] != "capsim" and missing_jax_stack():
        pytest.skip("needs the JAX stack (pip install -e '.[jax]')")
    flags = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS
    failed, tried = doctest.testmod(importlib.import_module(module), optionflags=flags)
    assert tried and not failed, f"{module}: {failed} of {tried} examples failed"
