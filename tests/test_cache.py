"""capsim.cache: where capsim keeps what it builds, and the commands' compilation cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import requires

from capsim import cache

PROBE = """
import json, jax
from capsim.cache import use_compilation_cache
used = use_compilation_cache()
print(json.dumps([str(used) if used else None, jax.config.jax_compilation_cache_dir]))
"""


def _probe(env: dict) -> list:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_cache_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "mine"))
    assert cache.cache_dir() == tmp_path / "mine"
    monkeypatch.delenv(cache.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "capsim"


@requires("jax")  # the commands run in a fresh process with JAX
def test_commands_compile_into_capsim_cache_unless_jax_has_one(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    env[cache.CACHE_ENV] = str(tmp_path)
    folder = str(tmp_path / "jax")
    assert _probe(env) == [folder, folder]
    assert (tmp_path / "jax").is_dir()
    env["JAX_COMPILATION_CACHE_DIR"] = str(tmp_path / "users")
    assert _probe(env) == [None, str(tmp_path / "users")]  # the user's choice stands
