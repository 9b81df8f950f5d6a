"""Smoke tests of bench/bench_busy_machine.py, bench/bench_main_job.py and
bench/bench_optimizers.py at tiny sizes, so that they cannot rot (their
figures come from the full runs)."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import bench_busy_machine, bench_main_job, bench_optimizers  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
              pytest.mark.slow]  # the benchmarks' cases, in child processes


def test_bench_busy_machine_runs_every_case(tmp_path, capsys):
    out = tmp_path / "busy.json"
    assert bench_busy_machine.main(["--n", "300", "--repeats", "2",
                                    "--competitor-size", "100", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert set(doc["cases"]) == {
        "quiet, 1 thread", "quiet, default threads, policy off",
        "quiet, default threads, policy on", "busy, default threads, policy off",
        "busy, default threads, policy on"}
    assert all(len(case["seconds"]) == 2 for case in doc["cases"].values())
    floor = doc["single_thread_floor"]
    assert [len(floor["seconds"][key]) for key in ("quiet", "busy")] == [2, 2]
    assert floor["median_ratio"] > 0
    assert "a single-threaded loop that is not fastgp's gets" in capsys.readouterr().out


def test_bench_optimizers_compares_cg_with_lbfgsb(tmp_path):
    out = tmp_path / "optimizers.json"
    assert bench_optimizers.main(["--n", "60", "--repeats", "1", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert set(doc["summary"]) == {"fmin_l_bfgs_b", "CG"}
    assert abs(doc["lml_gap"]) < 0.1


def test_bench_main_job_compares_quiet_and_busy_runs_bit_for_bit(tmp_path, capsys):
    out = tmp_path / "main_job.json"
    assert bench_main_job.main(["--runs", "2", "--busy", "2", "--n-samples", "300",
                                "--competitor-size", "100", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert [run["busy"] for run in doc["runs"]] == [False, True]
    assert doc["same_bits"] is True
    first, second = doc["runs"]
    assert first["theta"] == second["theta"] and first["lml"] == second["lml"]
    assert "every run the same bits: yes" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        bench_main_job.main(["--runs", "2", "--busy", "3", "--out", str(out)])
