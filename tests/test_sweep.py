"""launch.sweep: grid expansion, job names, aggregation, and a real tiny grid run."""

from __future__ import annotations

import csv
import json
import math
import textwrap
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from capsim import config_lib
from configs import (
    coco_cnn,
    coco_gru,
    demo_bow,
    demo_gru,
    i2ce_coco_margin,
    i2ce_coco_recon,
    sweep_vtfn,
)
from launch import aggregate, grid, sweep, tasks

REPO = Path(__file__).resolve().parents[1]
SWEEP_CONFIG = REPO / "configs" / "sweep_vtfn.py"
# 2 jobs and a failing one, 2 at a time: the smallest grid that runs jobs side by side,
# fails one, aggregates and resumes (it was 2 encoders x 2 losses, 5 jobs)
TINY_GRID = "encoder=bow_sum,loss=pearson+kendall,dataset=shapes_world"
BAD_LOSS = "no_such_loss"


def test_product_of_sweeps_varies_the_last_fastest():
    jobs = grid.product([grid.sweep("config.a", [1, 2]), grid.sweep("config.b", ["x", "y"])])
    assert jobs == [
        {"config.a": 1, "config.b": "x"},
        {"config.a": 1, "config.b": "y"},
        {"config.a": 2, "config.b": "x"},
        {"config.a": 2, "config.b": "y"},
    ]
    labelled = grid.sweep("config.model", {"small": {"dim": 8}})
    assert labelled == [{"config.model": grid.Choice("small", {"dim": 8})}]


def test_full_vtfn_grid_is_encoder_by_loss_by_dataset():
    jobs = grid.expand_grid(sweep.load_config_module(SWEEP_CONFIG), "")
    assert len(jobs) == len(sweep_vtfn.ENCODERS) * len(sweep_vtfn.LOSSES) * len(sweep_vtfn.DATASETS)
    assert jobs[0].name == "dataset=shapes_world,encoder=bow_sum,loss=pearson"
    assert jobs[-1].params == {"dataset": "files", "encoder": "cnn", "loss": "triplet"}
    assert all(key.startswith("config.") for job in jobs for key in job.overrides)


def _job_config(module, arg: str, job: grid.Job):
    config = module.get_config(arg)
    config.lock()
    config_lib.apply_overrides(config, json.loads(json.dumps(job.overrides)))  # as a job reads it
    return config.to_dict()


def test_vtfn_grid_jobs_are_the_experiment_files_configs():
    """A swept encoder brings its own keys (dropout, CNN widths) and a dataset its tasks:
    each job is the config of the experiment file it stands for."""
    module = sweep.load_config_module(SWEEP_CONFIG)
    arg = "dataset=files+shapes_world,encoder=gru+cnn+bow_sum,loss=pearson+kendall"
    jobs = {job.name: job for job in grid.expand_grid(module, arg)}
    assert len(jobs) == 12
    for name, expected in [
        ("dataset=files,encoder=gru,loss=pearson", coco_gru.get_config()),
        ("dataset=files,encoder=cnn,loss=kendall", coco_cnn.get_config("loss=kendall")),
        ("dataset=shapes_world,encoder=gru,loss=kendall", demo_gru.get_config("loss=kendall")),
        ("dataset=shapes_world,encoder=bow_sum,loss=pearson", demo_bow.get_config()),
    ]:
        expected.num_epochs = 20.0  # the grid's own; the demo files train 30
        assert _job_config(module, arg, jobs[name]) == expected.to_dict(), name
    arg += ",glove=package"
    bow = {job.name: job for job in grid.expand_grid(module, arg)}[
        "dataset=files,encoder=bow_sum,loss=pearson"
    ]
    glove = _job_config(module, arg, bow)
    assert glove["model"]["dim"] == glove["model"]["embed_dim"] == 50  # BOW N = GloVe's size


def test_i2ce_grid_runs_through_the_same_launcher():
    module = sweep.load_config_module(REPO / "configs" / "sweep_i2ce.py")
    assert module.TRAIN_MODULE == "i2ce_jax.train"
    jobs = grid.expand_grid(module, "hidden=256+512")
    assert len(jobs) == 10 and jobs[0].name == "branch=recon,hidden_dim=256"
    by_name = {job.name: job for job in jobs}
    margin_max = _job_config(module, "hidden=256+512", by_name["branch=margin-max,hidden_dim=512"])
    expected = i2ce_coco_margin.get_config("reduction=max")
    assert margin_max == expected.to_dict()
    recon = _job_config(module, "", by_name["branch=recon,hidden_dim=512"])
    assert recon["loss"] == i2ce_coco_recon.get_config().loss.to_dict()
    command = jobs[0].command(module.TRAIN_MODULE, "configs/sweep_i2ce.py", Path("/runs"))
    assert command[1:3] == ["-m", "i2ce_jax.train"]
    with pytest.raises(KeyError, match="unknown branches"):
        grid.expand_grid(module, "branch=recon+quadruplet")


def test_job_command_passes_arg_and_overrides_file(tmp_path):
    job = grid.expand_grid(sweep.load_config_module(SWEEP_CONFIG), "runlocal")[7]
    command = job.command("vtfn_jax.train", f"{SWEEP_CONFIG}:runlocal", tmp_path)
    assert command[1:3] == ["-m", "vtfn_jax.train"]
    assert command[3] == f"--config={SWEEP_CONFIG}:runlocal"
    assert command[4] == f"--workdir={tmp_path / job.name}"
    assert command[5] == f"--overrides={tmp_path / job.name / grid.OVERRIDES_FILE}"
    assert job.params == {"dataset": "shapes_world", "encoder": "bow_mean", "loss": "covariance"}
    assert job.overrides["config.loss.name"] == "covariance"
    assert job.overrides["config.model"]["encoder"] == {"kind": "bow_mean"}


def test_a_sweep_key_outside_config_is_refused():
    with pytest.raises(KeyError, match=r"must start with 'config\.'"):
        grid.job_of({"arg.encoder": "gru"})


def test_job_names_are_safe_folder_names():
    assert grid.param_label("config.loss.name") == "loss"
    assert grid.param_label("config.optimizer.learning_rate") == "learning_rate"
    assert (
        grid.job_name({"features": "/data/feat s", "lr": 0.001}) == "features=_data_feat_s,lr=0.001"
    )
    long_name = grid.job_name({"x": "y" * 500})
    assert len(long_name) == grid.MAX_NAME_CHARS
    assert long_name != grid.job_name({"x": "y" * 501})


def _write_sweep_config(tmp_path: Path, extra_job: dict) -> Path:
    path = tmp_path / "sweep_test.py"
    path.write_text(
        textwrap.dedent(
            f"""
            from configs import sweep_vtfn
            from configs.sweep_vtfn import METRICS, TRAIN_MODULE, get_config


            def get_sweep(hyper, arg=None):
                return [{extra_job!r}, *sweep_vtfn.get_sweep(hyper, arg)]
            """
        )
    )
    return path


def test_unknown_config_key_fails_before_any_job_runs(tmp_path):
    config = _write_sweep_config(tmp_path, {"config.loss.nmae": "kendall"})
    with pytest.raises(KeyError, match=r"loss\.nmae"):
        sweep.run_sweep(f"{config}:{TINY_GRID}", tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def _fake_job(workdir: Path, params: dict, returncode: int, results: dict | None) -> None:
    job_dir = workdir / grid.job_name(params)
    job_dir.mkdir(parents=True)
    record = {"name": job_dir.name, "params": params, "command": [], "returncode": returncode}
    (job_dir / grid.JOB_FILE).write_text(json.dumps(record))
    if results is not None:
        (job_dir / sweep.RESULTS_FILE).write_text(json.dumps(results))


def test_aggregate_tabulates_metrics_and_lists_failures(tmp_path):
    sts_year = {"spearman_mean": 61.5, "pearson_mean": 60.0}
    _fake_job(
        tmp_path,
        {"encoder": "gru", "loss": "pearson"},
        0,
        {
            "same_diff": {"auc": 80.0, "pearson": 50.0, "n": 2000},
            "retrieval": None,
            "shapes": None,
            "sts": {"STS15": sts_year, "STS16": sts_year, "avg2016": 60.0},
            "train": {"steps": 10, "best_dev_same_image_auc": 70.0},
        },
    )
    _fake_job(tmp_path, {"encoder": "gru", "loss": BAD_LOSS}, 1, None)
    rows = aggregate.aggregate(tmp_path, sweep_vtfn.METRICS)
    assert [row["status"] for row in rows] == ["failed", "ok"]
    ok = rows[1]
    assert (ok["same_diff_auc"], ok["c2i_mrr"], ok["STS16_spearman"], ok["avg2016"]) == (
        80.0,
        "",
        61.5,
        60.0,
    )
    with open(tmp_path / "results.csv") as f:
        table = list(csv.DictReader(f))
    assert [row["loss"] for row in table] == [BAD_LOSS, "pearson"]
    assert table[0]["same_diff_auc"] == "" and table[1]["STS15_spearman"] == "61.5"
    report = (tmp_path / "results.md").read_text()
    assert "## Failed jobs" in report
    assert str(tmp_path / f"encoder=gru,loss={BAD_LOSS}" / sweep.LOG_FILE) in report


@pytest.mark.parametrize(
    "config_file, arg, per_configuration",
    [
        ("sweep_vtfn.py", "encoder=bow_sum+gru,loss=pearson,dataset=shapes_world,seeds=3", 3),
        ("sweep_i2ce.py", "branch=recon+triplet,seeds=4", 4),
        ("sweep_vtfn.py", "encoder=bow_sum+gru,loss=pearson,dataset=shapes_world", 1),
    ],
)
def test_seeds_repeat_every_configuration(config_file, arg, per_configuration):
    jobs = grid.expand_grid(sweep.load_config_module(REPO / "configs" / config_file), arg)
    assert len(jobs) == 2 * per_configuration
    if per_configuration == 1:
        assert all("seed" not in job.params for job in jobs)  # names as they were
        return
    seeds = [job.overrides["config.seed"] for job in jobs]
    assert seeds == list(range(per_configuration)) * 2
    assert jobs[1].name.endswith(",seed=1")
    assert len({job.name.rsplit(",seed=", 1)[0] for job in jobs}) == 2


def test_jobs_side_by_side_share_an_accelerators_memory():
    assert tasks.MEM_FRACTION not in tasks.job_environment(1, {"PATH": "/bin"})
    env = tasks.job_environment(4, {"PATH": "/bin"})
    assert env == {"PATH": "/bin", tasks.MEM_FRACTION: "0.225"}
    mine = {tasks.MEM_FRACTION: "0.3"}
    assert tasks.job_environment(4, mine) == mine  # a user's setting wins
    off = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    assert tasks.job_environment(2, off) == off


def test_seeds_must_be_a_whole_number_of_one_or_more():
    with pytest.raises(ValueError, match="seeds must be a whole number >= 1"):
        grid.expand_grid(sweep.load_config_module(SWEEP_CONFIG), "seeds=0")


def test_means_over_seeds_carry_a_t_interval(tmp_path):
    """Two configurations over seeds (one seed of the second failed): each mean and its 95%
    interval against NumPy and SciPy's t quantile; a one-seed metric gets none."""
    aucs = {"pearson": [80.0, 82.5, 79.0], "kendall": [70.0, 71.0]}
    for loss, values in aucs.items():
        for seed, auc in enumerate(values):
            results = {"same_diff": {"auc": auc}, "train": {"steps": 10 + seed}}
            if seed == 0:
                results["retrieval"] = {"c2i_mrr": 0.5}
            _fake_job(tmp_path, {"loss": loss, "seed": seed}, 0, results)
    _fake_job(tmp_path, {"loss": "kendall", "seed": 2}, 1, None)
    aggregate.aggregate(tmp_path, sweep_vtfn.METRICS)
    with open(tmp_path / "results.csv") as f:
        table = list(csv.DictReader(f))
    means = {row["loss"]: row for row in table if row["status"] == "mean"}
    assert len(table) == 6 + 2 and set(means) == {"pearson", "kendall"}
    for loss, values in aucs.items():
        row = means[loss]
        n, mean = len(values), np.mean(values)
        half = stats.t.ppf(0.975, n - 1) * np.std(values, ddof=1) / math.sqrt(n)
        assert row["seed"] == f"mean of {n}"
        assert float(row["same_diff_auc"]) == pytest.approx(mean)
        assert float(row["same_diff_auc_ci_low"]) == pytest.approx(mean - half)
        assert float(row["same_diff_auc_ci_high"]) == pytest.approx(mean + half)
        assert row["c2i_mrr"] == "" and row["c2i_mrr_ci_low"] == ""  # one seed has it
    report = (tmp_path / "results.md").read_text()
    assert "## Means over seeds, with 95% intervals" in report
    low, high = (
        float(means["kendall"]["same_diff_auc_ci_low"]),
        float(means["kendall"]["same_diff_auc_ci_high"]),
    )
    assert f"| kendall | mean of 2 | 70.50 [{low:.2f}, {high:.2f}] |" in report


@pytest.mark.slow  # three training jobs, one failing, and a resume (27 s)
def test_tiny_grid_runs_resumes_and_survives_a_failed_job(tmp_path, capsys):
    """2 losses on the shapes world (runlocal), plus a job with an unknown loss."""
    config = _write_sweep_config(tmp_path, {"config.loss.name": BAD_LOSS})
    workdir = tmp_path / "runs"
    argv = [f"--config={config}:{TINY_GRID}", f"--workdir={workdir}", "--jobs=2", "--runlocal"]

    assert sweep.main(argv) == 1
    good = [
        f"dataset=shapes_world,encoder={e},loss={loss}"
        for e in ("bow_sum",)
        for loss in ("pearson", "kendall")
    ]
    bad = f"loss={BAD_LOSS}"
    for name in good:
        results = json.loads((workdir / name / sweep.RESULTS_FILE).read_text())
        assert math.isfinite(results["shapes"]["graded_spearman"])
    assert not (workdir / bad / sweep.RESULTS_FILE).exists()
    assert BAD_LOSS in (workdir / bad / sweep.LOG_FILE).read_text()
    out = capsys.readouterr()
    assert "grid of 3: 0 already done, running 3" in out.out
    assert "[3/3]" in out.out and "grid 2/3 done" in out.out
    assert f"FAILED {bad}" in out.err

    with open(workdir / "results.csv") as f:
        table = list(csv.DictReader(f))
    assert len(table) == 3
    assert {"dataset", "encoder", "loss", "same_diff_auc", "shapes_graded_spearman"} <= set(
        table[0]
    )
    by_name = {row["job"]: row for row in table}
    assert all(by_name[name]["status"] == "ok" and by_name[name]["c2i_mrr"] for name in good)
    assert by_name[bad]["status"] == "failed" and by_name[bad]["same_diff_auc"] == ""
    report = (workdir / "results.md").read_text()
    assert report.count("| shapes_world |") == 2
    assert str(workdir / bad / sweep.LOG_FILE) in report

    finished = {name: (workdir / name / sweep.RESULTS_FILE).stat().st_mtime_ns for name in good}
    assert sweep.main(argv) == 1
    assert "grid of 3: 2 already done, running 1" in capsys.readouterr().out
    assert finished == {
        name: (workdir / name / sweep.RESULTS_FILE).stat().st_mtime_ns for name in good
    }
