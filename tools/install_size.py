"""The two installs, each in a fresh virtual environment: size and time (issue 47 §4).

    python tools/install_size.py [--python python3.12] [--installs metrics,jax,all]

``metrics`` is ``pip install -e .`` (the caption metrics: NumPy, SciPy, numba,
pycocoevalcap), ``jax`` adds the JAX stack (training, the I2CE scorer), ``all`` is the
README's ``pip install -e ".[all]"`` (every extra but ``bench`` and ``tf``). Each runs in a new venv made with ``--python``, with pip's
own cache as this machine has it (the time is mostly unpacking and byte-compiling, a
download only where the cache lacks a wheel: the row says how many were downloaded).
Reports wall seconds, the venv's site-packages in MB, the number of distributions, the
largest ones, and whether JAX is in it. Results: bench/RESULTS.md, "Installs".
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import json
import shutil
import subprocess
import tempfile
import time

from bench.harness import REPO, load_average, record_results
from capsim.tables import format_table

SECTION = "## Installs"
INSTALLS = {"metrics": ".", "jax": ".[jax]", "all": ".[all]"}
LARGEST = 6


def folder_megabytes(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def measure(python: str, name: str, target: str) -> dict:
    """One fresh venv, one ``pip install -e TARGET``: its wall time and what it left."""
    with tempfile.TemporaryDirectory(prefix=f"install-{name}-") as folder:
        venv = Path(folder) / "venv"
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip"]
        subprocess.run([*pip, "install", "-q", "--upgrade", "pip"], check=True)
        (site,) = venv.glob("lib/python*/site-packages")
        before = folder_megabytes(site)  # pip itself
        load = load_average()
        start = time.perf_counter()
        done = subprocess.run(
            [*pip, "install", "-e", target], cwd=REPO, capture_output=True, text=True, check=True
        )
        seconds = time.perf_counter() - start
        listed = json.loads(
            subprocess.run(
                [*pip, "list", "--format", "json"], capture_output=True, text=True, check=True
            ).stdout
        )
        sizes = {
            path.name: folder_megabytes(path)
            for path in site.iterdir()
            if path.is_dir() and not path.name.endswith((".dist-info", "__pycache__"))
        }
        largest = sorted(sizes.items(), key=lambda item: -item[1])[:LARGEST]
        return {
            "install": name,
            "command": f'pip install -e "{target}"',
            "python": subprocess.run(
                [str(venv / "bin" / "python"), "--version"], capture_output=True, text=True
            ).stdout.strip(),
            "seconds": round(seconds, 1),
            "site_packages_mb": round(folder_megabytes(site) - before),
            "distributions": len(listed) - 1,  # pip
            "downloaded": done.stdout.count("Downloading "),
            "has_jax": any(d["name"] == "jax" for d in listed),
            "largest": ", ".join(f"{n} {mb:.0f}" for n, mb in largest),
            "load": round(load, 2),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable, help="the venvs' interpreter")
    parser.add_argument("--installs", default=",".join(INSTALLS), help="comma-separated")
    parser.add_argument("--no-record", action="store_true", help="print only")
    args = parser.parse_args()
    python = shutil.which(args.python) or args.python
    rows = []
    for name in args.installs.split(","):
        rows.append(measure(python, name, INSTALLS[name]))
        print(json.dumps(rows[-1]), flush=True)
    columns = ["install", "command", "python", "seconds", "site_packages_mb", "distributions"]
    columns += ["downloaded", "has_jax", "largest", "load"]
    text = format_table(rows, columns)
    text += "\n\nsite_packages_mb excludes pip itself; largest: the biggest packages, in MB."
    print(text)
    if not args.no_record:
        record_results("install_size", rows, SECTION, text)


if __name__ == "__main__":
    main()
