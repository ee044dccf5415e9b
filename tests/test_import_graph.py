"""The packages import each other without cycles, function-level imports included.

Every ``import`` statement of capsim, vtfn_jax and i2ce_jax (read from the
source, so an import inside a function counts too) is an edge from its module
to the package module it names, and to the packages whose ``__init__`` runs
first (importing ``capsim.train.lock`` from outside capsim.train runs
capsim/train/__init__.py); the graph must have no cycle. A cycle hidden
behind a function-level import still breaks whoever imports the other end
first, and it hides which module owns what. The same holds over the whole tree, bench/,
tools/, launch/ and configs/ included, which the installed packages never import.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from conftest import requires

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("capsim", "vtfn_jax", "i2ce_jax")
# Used from a clone, on top of the packages: the benchmarks, the development tools, the
# sweep launcher and the configs.
CLONE_ONLY = ("bench", "tools", "launch", "configs")
# The modules that may import capsim.train: training itself and the two training entry
# points. Models are declared as tasks (capsim.task) below it.
TRAINING = ("capsim.train", "vtfn_jax.train", "i2ce_jax.train")
# The commands on top of training, the only modules besides TRAINING that reach it: the
# packaged I2CE models' rebuild, which trains a recipe and exports it.
TRAINING_COMMANDS = ("i2ce_jax.rebuild_pretrained",)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    return {
        _module_name(path): path for package in packages for path in (REPO / package).rglob("*.py")
    }


def _imported(node: ast.AST, modules: dict[str, Path]) -> list[str]:
    """The package modules one import statement loads (``from a import b``: a.b when it is
    a module, else a)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name in modules]
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        targets = []
        for alias in node.names:
            submodule = f"{node.module}.{alias.name}"
            targets.append(submodule if submodule in modules else node.module)
        return [t for t in targets if t in modules]
    return []


def _with_packages(target: str, importer: str, modules: dict[str, Path]) -> set[str]:
    """``target`` and the packages whose ``__init__`` runs first when ``importer`` loads it:
    its parents that do not contain ``importer`` (those are already running)."""
    parts = target.split(".")
    parents = {".".join(parts[:i]) for i in range(1, len(parts))}
    running = {".".join(importer.split(".")[:i]) for i in range(1, importer.count(".") + 2)}
    return {target} | {p for p in parents - running if p in modules}


def import_graph(packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    modules = _modules(packages)
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        graph[name] = {
            module
            for node in ast.walk(tree)
            for target in _imported(node, modules)
            for module in _with_packages(target, name, modules)
            if module != name
        }
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None (depth-first search)."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_cycle_finder_finds_a_planted_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a"}}) is None


def test_the_graph_sees_function_level_imports():
    graph = import_graph()
    # i2ce_jax.scorer imports the packaged models inside I2CEScorer.pretrained.
    assert "i2ce_jax.pretrained" in graph["i2ce_jax.scorer"]
    assert "capsim.train.trainer" in graph["capsim.train"]
    # Importing capsim.train.trainer from outside runs capsim/train/__init__ first.
    assert "capsim.train" in graph["vtfn_jax.train"]


def test_no_import_cycles_in_the_packages():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_import_cycles_in_the_whole_tree():
    """bench/, tools/, launch/ and configs/ included."""
    cycle = find_cycle(import_graph(PACKAGES + CLONE_ONLY))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_packages_import_nothing_used_from_a_clone_and_bench_no_tool():
    """The installed packages never reach bench/, tools/, launch/ or configs/ (the wheel has
    none of them); the benches never import a development tool (tools/ sits on bench/)."""
    graph = import_graph(PACKAGES + CLONE_ONLY)
    offenders = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        for target in targets
        if (module.split(".")[0] in PACKAGES and target.split(".")[0] in CLONE_ONLY)
        or (module.split(".")[0] == "bench" and target.split(".")[0] == "tools")
    )
    assert not offenders, offenders
    assert "bench.cases.catalogue" in graph["bench.speed.step_levers"]


def test_only_training_imports_the_trainer():
    """Models, data pipelines, checkpoint reading, scoring and evaluation sit below training
    (docs/architecture.md, first paragraph): outside TRAINING no module names capsim.train."""
    offenders = sorted(
        f"{module} -> {target}"
        for module, targets in import_graph().items()
        if not module.startswith(TRAINING)
        for target in targets
        if target == "capsim.train" or target.startswith("capsim.train.")
    )
    assert not offenders, offenders


def _reached(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module that importing ``start`` loads, through any chain of imports."""
    seen: set[str] = set()
    stack = [start]
    while stack:
        for module in graph.get(stack.pop(), ()):
            if module not in seen:
                seen.add(module)
                stack.append(module)
    return seen


def _is_training(module: str) -> bool:
    return module.startswith(TRAINING)


def test_nothing_below_training_reaches_it_through_any_chain():
    """No arrow up anywhere: outside TRAINING and TRAINING_COMMANDS no module loads a
    training module, directly or through others (the packaged models' loader included:
    i2ce_jax/pretrained/ is what the scorer loads)."""
    graph = import_graph()
    offenders = sorted(
        module
        for module in graph
        if not _is_training(module) and module not in TRAINING_COMMANDS
        if any(_is_training(target) for target in _reached(graph, module))
    )
    assert not offenders, offenders
    assert _reached(graph, "i2ce_jax.rebuild_pretrained") >= {"i2ce_jax.train", "capsim.train"}


def test_in_i2ce_jax_only_the_trainer_and_the_rebuild_name_a_trainer():
    """The direct form of the rule for the paper that ships models: under i2ce_jax/ only
    i2ce_jax/train.py and i2ce_jax/rebuild_pretrained.py import i2ce_jax.train or
    capsim.train."""
    offenders = sorted(
        f"{module} -> {target}"
        for module, targets in import_graph().items()
        if module.split(".")[0] == "i2ce_jax"
        and module not in ("i2ce_jax.train", *TRAINING_COMMANDS)
        for target in targets
        if target == "i2ce_jax.train" or target.split(".")[:2] == ["capsim", "train"]
    )
    assert not offenders, offenders


def test_the_shared_core_imports_no_paper_package():
    """capsim sits below both papers (docs/architecture.md): a paper plugs into it (as
    i2ce_jax.cocoeval passes its scorer to capsim's evaluator), never the reverse."""
    offenders = sorted(
        f"{module} -> {target}"
        for module, targets in import_graph().items()
        if module.split(".")[0] == "capsim"
        for target in targets
        if target.split(".")[0] in ("vtfn_jax", "i2ce_jax")
    )
    assert not offenders, offenders


CAPTION_METRICS = (
    "ptb",
    "ptb_tables",
    "ngram",
    "ngram_counts",
    "meteor",
    "coco_metrics",
    "cocoeval",
    "bootstrap",
    "tfidf",
    "pooling",
    "bleu",
    "rouge",
    "cider",
    "tokenizer",
)


def test_the_caption_metrics_import_no_harness():
    """capsim.metrics is what users compute; capsim.eval holds the harnesses that judge
    models with it (docs/architecture.md). The harnesses use the metrics, never the reverse."""
    graph = import_graph()
    offenders = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module.startswith("capsim.metrics")
        for target in targets
        if target == "capsim.eval" or target.startswith("capsim.eval.")
    )
    assert not offenders, offenders
    assert any(t.startswith("capsim.metrics") for t in graph["capsim.eval.judgment_harness"])


def test_capsim_eval_holds_no_caption_metric():
    """The metrics moved once, with no alias module left behind in capsim/eval/."""
    left = sorted(
        path.name
        for path in (REPO / "capsim" / "eval").iterdir()
        if path.stem in CAPTION_METRICS or path.name == "ptb_characters.txt"
    )
    assert not left, left


def test_the_paper_rule_sees_a_planted_import(tmp_path):
    """The rule reads function-level imports too: one planted in a capsim module is caught."""
    planted = tmp_path / "capsim" / "eval"
    planted.mkdir(parents=True)
    (planted / "planted.py").write_text("def f():\n    from i2ce_jax.scorer import I2CEScorer\n")
    modules = {**_modules(), "capsim.eval.planted": planted / "planted.py"}
    tree = ast.parse((planted / "planted.py").read_text())
    targets = {t for node in ast.walk(tree) for t in _imported(node, modules)}
    assert "i2ce_jax.scorer" in targets


INFERENCE = """
import sys
from i2ce_jax.scorer import I2CEScorer
score, _ = I2CEScorer.pretrained().compute_score({"1": ["a dog runs on grass"]}, {"1": ["a dog"]})
assert 0 < score <= 1, score
import capsim.data.pipeline, capsim.checkpoints, capsim.task, i2ce_jax.evaluate, i2ce_jax.score
import vtfn_jax.evaluate, vtfn_jax.extract_features, vtfn_jax.sentence_encoder, vtfn_jax.kinds
print(sorted(m for m in sys.modules if m == "capsim.train" or m.startswith("capsim.train.")))
"""


@requires("jax")  # the scorer runs in a fresh process with JAX
def test_scoring_a_caption_and_loading_inference_code_never_load_the_trainer():
    """In a fresh process: score a caption with the packaged model and import every
    inference and evaluation entry point; no capsim.train module is loaded."""
    done = subprocess.run(
        [sys.executable, "-c", INFERENCE], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
