"""The papers' tables as seeded grids (launch.paper_table, launch.report, configs/tables/):
verdicts against SciPy, planted grids, refused claims, a grid's one ending (launch.finish),
every table config at both scales, and a test-sized table run end to end."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import jax
import ml_collections
import numpy as np
import pytest
from flax import nnx
from scipy import stats

from launch import finish, grid, report, sweep
from launch.paper_table import Claim, Table
from launch.paper_table.output import TABLE_JSON, TABLE_MARKDOWN, table_report
from launch.paper_table.values import grid_values
from launch.paper_table.verdicts import (
    HOLDS,
    NOT_TOLD_APART,
    REVERSED,
    claim_verdict,
    paired_verdict,
)
from vtfn_jax.model import VTFN, make_loss_fn

REPO = Path(__file__).resolve().parents[1]
TABLE_CONFIGS = sorted((REPO / "configs" / "tables").glob("*.py"))
SEEDS = range(5)
MEASURES = {"x": ("scores", "x"), "y": ("scores", "y")}


def test_paired_verdicts_agree_with_scipys_paired_t_test():
    rng = np.random.default_rng(0)
    lower = rng.normal(50.0, 2.0, 6)
    planted = {
        HOLDS: lower + 1.5 + rng.normal(0, 0.3, 6),
        REVERSED: lower - 1.5 + rng.normal(0, 0.3, 6),
        NOT_TOLD_APART: lower + rng.normal(0, 3.0, 6),
    }
    for expected, higher in planted.items():
        verdict = paired_verdict(higher, lower)
        test = stats.ttest_rel(higher, lower)
        low, high = test.confidence_interval(0.95)
        assert verdict.verdict == expected
        assert verdict.seeds == 6
        np.testing.assert_allclose(verdict.difference, np.mean(higher - lower), rtol=1e-12)
        np.testing.assert_allclose([verdict.low, verdict.high], [low, high], rtol=1e-10)
        np.testing.assert_allclose(verdict.p, test.pvalue, rtol=1e-8)
    assert paired_verdict(planted[NOT_TOLD_APART], lower).p > 0.05


def test_a_difference_equal_in_every_seed_has_no_spread_to_divide_by():
    """BOW sum against BOW mean: the same run seed for seed, a difference of exactly 0."""
    same = [61.2, 60.8, 62.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no division by a zero spread, no NaN warning
        zero = paired_verdict(same, same)
        shifted = paired_verdict([v + 0.5 for v in same], same)
    assert (zero.verdict, zero.difference, zero.low, zero.high, zero.p) == (
        NOT_TOLD_APART,
        0.0,
        0.0,
        0.0,
        1.0,
    )
    assert shifted.verdict == HOLDS and shifted.p == 0.0
    assert math.isclose(shifted.low, 0.5) and math.isclose(shifted.high, 0.5)


def test_one_seed_or_none_is_not_told_apart():
    one = paired_verdict([2.0], [1.0])
    assert one.verdict == NOT_TOLD_APART and one.difference == 1.0 and math.isnan(one.p)
    assert paired_verdict([], []).verdict == NOT_TOLD_APART


def _table(**changes) -> Table:
    fields = dict(
        title="planted",
        rows=("a", "b", "c"),
        measures=MEASURES,
        averages={"avg": ("x", "y")},
        fixed_rows={"CIDEr": {"x": ("fixed", "cider")}},
        scales={"here": "a planted grid"},
        claims=(
            Claim("a beats b on x", "a", "b", "x"),
            Claim("c beats a on y", "c", "a", "y"),
            Claim("a beats c on the average", "a", "c", "avg"),
            Claim("a and b together beat CIDEr on x", ("a", "b"), "CIDEr", "x"),
        ),
    )
    return Table(**{**fields, **changes})


def _plant(workdir: Path) -> dict[str, dict[int, dict[str, float]]]:
    """A finished grid on disk: rows a, b, c at 5 seeds, and a CIDEr figure in every job.

    a beats b on x by 2 (small noise); c beats a on y by 3; on the average a and c are
    within noise of each other; CIDEr is 40 on x."""
    rng = np.random.default_rng(1)
    planted = {}
    for seed in SEEDS:
        base_x, base_y = 50 + rng.normal(0, 1), 30 + rng.normal(0, 1)
        rows = {
            "a": (base_x + 2 + rng.normal(0, 0.2), base_y),
            "b": (base_x, base_y + rng.normal(0, 0.2)),
            "c": (base_x - 3 + rng.normal(0, 2), base_y + 3 + rng.normal(0, 2)),
        }
        for row, (x, y) in rows.items():
            job = workdir / f"row={row},seed={seed}"
            job.mkdir(parents=True)
            record = {"name": job.name, "params": {"row": row, "seed": seed}}
            (job / grid.JOB_FILE).write_text(json.dumps(record))
            results = {"scores": {"x": x, "y": y}, "fixed": {"cider": 40.0}}
            (job / "results.json").write_text(json.dumps(results))
            planted.setdefault(row, {})[seed] = {"x": x, "y": y}
    # an unfinished job (no results.json) is skipped, not read as a zero
    (workdir / "row=a,seed=9").mkdir()
    unfinished = {"name": "row=a,seed=9", "params": {"row": "a", "seed": 9}}
    (workdir / "row=a,seed=9" / grid.JOB_FILE).write_text(json.dumps(unfinished))
    return planted


def test_a_planted_grid_gives_each_verdict_where_it_should(tmp_path):
    planted = _plant(tmp_path)
    table = _table()
    values = grid_values(tmp_path, table)
    assert sorted(values["a"]) == list(SEEDS)
    verdicts = {claim.text: claim_verdict(values, claim) for claim in table.claims}
    assert verdicts["a beats b on x"].verdict == HOLDS
    assert verdicts["c beats a on y"].verdict == HOLDS
    assert verdicts["a beats c on the average"].verdict == NOT_TOLD_APART

    # the average is re-derived per seed, then paired
    def average(row: str, seed: int) -> float:
        return (planted[row][seed]["x"] + planted[row][seed]["y"]) / 2

    d = [average("a", s) - average("c", s) for s in SEEDS]
    check = stats.ttest_1samp(d, 0.0)
    np.testing.assert_allclose(verdicts["a beats c on the average"].p, check.pvalue, rtol=1e-8)
    # a fixed metric has no seed: the interval is the trained side's over seeds alone
    cider = verdicts["a and b together beat CIDEr on x"]
    side = [(planted["a"][s]["x"] + planted["b"][s]["x"]) / 2 for s in SEEDS]
    low, high = stats.t.interval(0.95, len(side) - 1, np.mean(side), stats.sem(side))
    assert cider.verdict == HOLDS
    np.testing.assert_allclose([cider.low, cider.high], [low - 40, high - 40], rtol=1e-10)
    # reversing a claim reverses its verdict
    reversed_claim = Claim("b beats a on x", "b", "a", "x")
    assert claim_verdict(values, reversed_claim).verdict == REVERSED


def _planted_config(path: Path, *claims: str) -> Path:
    """A table config over _plant's grid (rows a, b, c; five seeds), built by table_grid."""
    path.write_text(
        "import ml_collections\n"
        "from capsim.config_lib import parse_scaled_arg\n"
        "from launch.paper_table import Claim, Table, table_grid\n"
        "TRAIN_MODULE = 'vtfn_jax.train'\n"
        f"METRICS = {MEASURES!r}\n"
        f"TABLE = Table(title='planted', rows=('a', 'b', 'c'), measures={MEASURES!r},\n"
        "    averages={'avg': ('x', 'y')}, scales={'here': 'a planted grid'},\n"
        "    paper={('a', 'x'): 51.0},\n"
        "    claims=(Claim('a beats b on x', 'a', 'b', 'x', 'Table 9'),\n"
        "            Claim('c beats a on y', 'c', 'a', 'y'),\n"
        + "".join(f"            {claim},\n" for claim in claims)
        + "))\n"
        "def _parse(arg=None):\n"
        "    return parse_scaled_arg(arg, {'here': {}}, rows='', seeds=5)\n"
        "def _row(arg, row):\n"
        "    return ml_collections.ConfigDict({'seed': 0, 'row': row})\n"
        "get_config, get_sweep, parse_table_arg = table_grid(_parse, _row, ('a', 'b', 'c'))\n"
    )
    return path


def test_the_report_lays_out_the_planted_grid_with_every_claim(tmp_path, monkeypatch, capsys):
    _plant(tmp_path / "grid")
    config = _planted_config(
        tmp_path / "planted_table.py", "Claim('d beats a on y', 'd', 'a', 'y')"
    )
    assert report.main([f"--config={config}", f"--workdir={tmp_path / 'grid'}"]) == 2
    refused = capsys.readouterr().err
    assert "claim 'd beats a on y' names the row(s), absent from the grid ['d']" in refused
    _planted_config(config)
    assert report.main([f"--config={config}", f"--workdir={tmp_path / 'grid'}"]) == 0
    written = json.loads((tmp_path / "grid" / TABLE_JSON).read_text())
    assert [c["text"] for c in written["claims"]] == ["a beats b on x", "c beats a on y"]
    assert [c["verdict"] for c in written["claims"]] == [HOLDS, HOLDS]
    assert written["seeds"] == list(SEEDS)
    a_x = written["rows"][0]["cells"]["x"]
    assert a_x["seeds"] == 5 and a_x["paper"] == 51.0 and a_x["low"] < a_x["mean"] < a_x["high"]
    markdown = (tmp_path / "grid" / TABLE_MARKDOWN).read_text()
    assert "(paper: 51.00)" in markdown and "| a beats b on x | Table 9 | x |" in markdown
    assert markdown.count("| **holds** |") == 2
    assert "wrote" in capsys.readouterr().out


def test_a_grid_ends_with_its_table_only_when_its_config_is_a_table(tmp_path, capsys):
    """launch.finish, the one ending of the local and the SLURM grid: results.csv and
    results.md for every grid; table.md and table.json for a table config, the very
    files launch.report writes afterwards."""
    for name in ("table", "plain"):
        _plant(tmp_path / name)
    table_config = grid.load_config_module(_planted_config(tmp_path / "planted_table.py"))
    finish.finish_grid(tmp_path / "table", table_config)
    finish.finish_grid(tmp_path / "plain", grid.load_config_module(REPO / "configs/sweep_vtfn.py"))
    ends = {
        name: sorted(path.name for path in (tmp_path / name).iterdir() if path.is_file())
        for name in ("table", "plain")
    }
    assert ends == {
        "table": ["results.csv", "results.md", TABLE_JSON, TABLE_MARKDOWN],
        "plain": ["results.csv", "results.md"],
    }
    assert f"wrote {tmp_path / 'table' / TABLE_MARKDOWN}" in capsys.readouterr().out
    ended = {name: (tmp_path / "table" / name).read_text() for name in (TABLE_JSON, TABLE_MARKDOWN)}
    assert (
        report.main(
            [f"--config={tmp_path / 'planted_table.py'}", f"--workdir={tmp_path / 'table'}"]
        )
        == 0
    )
    assert {name: (tmp_path / "table" / name).read_text() for name in ended} == ended


def test_a_claim_naming_an_absent_row_or_measure_is_refused_naming_it():
    with pytest.raises(KeyError, match=r"'z beats a' names the row\(s\), absent .*\['z'\]"):
        _table(claims=(Claim("z beats a", "z", "a", "x"),))
    with pytest.raises(KeyError, match=r"names the measure, absent from the table \['w'\]"):
        _table(claims=(Claim("a beats b on w", "a", "b", "w"),))
    with pytest.raises(KeyError, match=r"average 'avg' names the measure\(s\) \['q'\]"):
        _table(averages={"avg": ("x", "q")})
    with pytest.raises(KeyError, match=r"paper figure at 'x' names the row \['e'\]"):
        _table(paper={("e", "x"): 1.0})
    with pytest.raises(KeyError, match=r"paper figure of 'a' names the measure \['v'\]"):
        _table(paper={("a", "v"): 1.0})


def test_a_sub_grid_lists_the_claims_it_cannot_judge(tmp_path):
    module = grid.load_config_module(REPO / "configs" / "tables" / "vtfn_t4_losses.py")
    built = table_report(tmp_path, module, "rows=pearson+kendall,seeds=2")
    assert [c["text"] for c in built["claims"]] == [c.text for c in module.TABLE.claims]
    judged = [c for c in built["claims"] if "not_evaluated" not in c]
    assert [c["lower"] for c in judged] == [("kendall",)]
    assert judged[0]["seeds"] == 0 and judged[0]["verdict"] == NOT_TOLD_APART  # nothing ran
    skipped = [c["not_evaluated"] for c in built["claims"] if "not_evaluated" in c]
    assert skipped == ["rows not in this grid: covariance", "rows not in this grid: rank"]
    assert [r["row"] for r in built["rows"]] == ["pearson", "kendall"]


@pytest.mark.parametrize("path", TABLE_CONFIGS, ids=lambda p: p.stem)
@pytest.mark.parametrize("scale", ["here", "paper"])
def test_every_table_config_builds_its_grid_at_both_scales(path, scale):
    module = grid.load_config_module(path)
    table = module.TABLE
    jobs = grid.expand_grid(module, f"scale={scale}")
    rows = [job.params["row"] for job in jobs]
    seeds = {job.params["seed"] for job in jobs}
    assert sorted(set(rows)) == sorted(table.rows)
    assert seeds == set(range(len(seeds))) and len(seeds) >= 3  # the least
    assert len(jobs) == len(table.rows) * len(seeds)
    config = module.get_config(f"scale={scale}")
    # every measure reads a report the config runs
    assert {path[0] for path in table.measures.values()} <= set(config.evals)
    two = grid.expand_grid(module, f"scale={scale},seeds=2")
    assert len(two) == len(table.rows) * 2


@pytest.mark.parametrize("scale", ["here", "paper"])
def test_a_baseline_row_trains_on_the_tables_data_with_its_own_numbers(scale):
    """configs/baseline_*.py beside the VTFN rows: the same captions, features, epochs and
    selection; the baseline file's own model and learning rate."""
    module = grid.load_config_module(REPO / "configs" / "tables" / "vtfn_t1_baselines.py")
    vtfn = module.get_config(f"scale={scale},rows=bow")
    for row, baseline in module.BASELINES.items():
        config = module.get_config(f"scale={scale},rows={row}")
        own = baseline.get_config()
        assert config.data.to_dict() == vtfn.data.to_dict()
        assert (config.num_epochs, config.early_stopping) == (vtfn.num_epochs, vtfn.early_stopping)
        assert config.model.to_dict() == own.model.to_dict()
        assert config.optimizer.learning_rate == own.optimizer.learning_rate
    if scale == "paper":
        assert vtfn.data.captions_per_image == "one" and vtfn.num_epochs == 20.0
        assert vtfn.early_stopping.metric == "sts16/avg2016"


def test_bow_sum_and_bow_mean_are_one_model():
    """The sentence vector's scale cancels in every cosine, so the loss and its gradients
    are the same function of the weights: a seed trains the same run (Table 3's two BOW
    rows, reported as one)."""
    config = ml_collections.ConfigDict(
        {"loss": {"name": "pearson", "image_weight": 1.0, "pivot_weight": 0.0}}
    )
    rng = np.random.default_rng(0)
    lengths = rng.integers(2, 9, 16)
    batch = {
        "ids": jax.numpy.asarray(rng.integers(1, 40, (16, 9))),
        "mask": jax.numpy.asarray(np.arange(9)[None, :] < lengths[:, None]),
        "group": jax.numpy.asarray(np.arange(16) // 2),
        "features": jax.numpy.asarray(rng.normal(size=(16, 12)), jax.numpy.float32),
    }
    loss_fn = make_loss_fn(config)
    outcomes = []
    for kind in ("bow_sum", "bow_mean"):
        model = VTFN(40, 12, {"dim": 8, "encoder": {"kind": kind}}, rngs=nnx.Rngs(params=3))
        grads = nnx.grad(lambda m: loss_fn(m, batch, jax.random.key(0))[0])(model)
        loss = loss_fn(model, batch, jax.random.key(0))[0]
        outcomes.append((float(loss), jax.tree.leaves(nnx.state(grads))))
    (sum_loss, sum_grads), (mean_loss, mean_grads) = outcomes
    assert not np.allclose(sum_grads[0], 0)
    np.testing.assert_allclose(sum_loss, mean_loss, rtol=1e-5)
    for a, b in zip(sum_grads, mean_grads, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7)


@pytest.mark.slow  # 8 tiny jobs in 4 processes on COCO val2017 captions (about a minute)
def test_a_test_sized_table_run_writes_the_report_with_every_claim(tmp_path, shared_data, capsys):
    config = REPO / "configs" / "tables" / "vtfn_t4_losses.py"
    arg = f"seeds=2,data_dir={shared_data}"
    argv = [f"--config={config}:{arg}", f"--workdir={tmp_path}", "--runlocal", "--pack=2"]
    assert sweep.main(argv) == 0
    module = grid.load_config_module(config)
    written = json.loads((tmp_path / TABLE_JSON).read_text())
    assert [c["text"] for c in written["claims"]] == [c.text for c in module.TABLE.claims]
    for claim in written["claims"]:
        assert claim["seeds"] == 2 and claim["verdict"] in (HOLDS, REVERSED, NOT_TOLD_APART)
        assert math.isfinite(claim["difference"])
    assert [r["row"] for r in written["rows"]] == list(module.TABLE.rows)
    for row in written["rows"]:
        assert all(cell["seeds"] == 2 for cell in row["cells"].values())
    markdown = (tmp_path / TABLE_MARKDOWN).read_text()
    assert all(c.text in markdown for c in module.TABLE.claims)
    assert f"wrote {tmp_path / TABLE_MARKDOWN}" in capsys.readouterr().out
