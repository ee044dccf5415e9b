"""docs/architecture.md against the tree: every file it names exists, and its layout names
every module of the shared core, of the trainer, of the bench (and each of its folders) and
of the tools. bench/README.md against bench/: a few doors at the top, every folder's purpose
and every runnable bench or tool named."""

from __future__ import annotations

import re
from pathlib import Path

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
