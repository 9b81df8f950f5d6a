"""Smoke tests of the benchmark code (bench/), so that it cannot rot: the
comparison command at tiny N with fastgp and scikit-learn only, one case in a
fresh process, the memory probe, the skip paths, the target checks, every
script's ``python -m bench.NAME`` entry point and the pytest-benchmark suites
(bench/suites/) run once each at a tiny N.

Needs only the ``test`` extra: the comparison runs with --no-plots (no
matplotlib) and bench/_measure.py reads /proc instead of psutil.
"""

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

# bench/ is a folder of the repository, not part of the installed package
REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from bench import compare  # noqa: E402
from bench._measure import PeakMemory, run_in_subprocess  # noqa: E402
from bench._problems import make_problem  # noqa: E402
from bench._report import evaluate_targets  # noqa: E402
from bench.peers import get_adapter  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
              pytest.mark.slow]  # the benchmarks' cases, in child processes


def _tiny_args(tmp_path, peers="fastgp,sklearn"):
    return ["--sizes", "48,64", "--problems", "1d", "--peers", peers, "--fit-n", "48",
            "--repeats", "1", "--no-plots", "--in-process", "--out-dir", str(tmp_path)]


def test_compare_writes_markdown_and_json_with_expected_rows(tmp_path, monkeypatch):
    # a peer that is not installed is a skipped row, not an error
    monkeypatch.setattr(get_adapter("gpy"), "package", "no_such_module_for_fastgp_smoke")
    assert compare.main(_tiny_args(tmp_path, "fastgp,sklearn,gpy")) == 0

    doc = json.loads((tmp_path / "comparison.json").read_text())
    by = {(c["library"], c["n"], c["kind"]): c for c in doc["cases"]}
    for library in ("fastgp", "sklearn"):
        for n in (48, 64):
            case = by[(library, n, "loss_grad")]
            assert case["status"] == "ok", case
            assert case["time"]["loss_grad"]["median_s"] > 0
            # the figure the memory table is built from (its size at this N is
            # tested in a fresh process below)
            assert np.isfinite(case["memory"]["delta_mb"])
        assert by[(library, 48, "fit")]["status"] == "ok"
    # the floor is timed in fastgp's process, and both libraries agree on the loss
    assert by[("fastgp", 64, "loss_grad")]["time"]["floor-potrf-potri"]["median_s"] > 0
    np.testing.assert_allclose(by[("sklearn", 64, "loss_grad")]["value"],
                               by[("fastgp", 64, "loss_grad")]["value"], rtol=1e-8)
    fits = [by[(lib, 48, "fit")]["fit"] for lib in ("fastgp", "sklearn")]
    assert fits[0]["n_evaluations"] > 1
    np.testing.assert_allclose(fits[0]["final_nlml"], fits[1]["final_nlml"], rtol=1e-6)
    assert by[("gpy", 64, "loss_grad")]["status"] == "skipped"
    env = doc["environment"]
    assert env["versions"]["numpy"] and env["numba_threads"] >= 1 and "git" in env

    md = (tmp_path / "comparison.md").read_text()
    assert "| 64 | fastgp |" in md and "| 64 | scikit-learn |" in md
    assert "floor: dpotrf + dpotri" in md
    assert "Full fit from the same start" in md and "| 1d | 48 | scikit-learn |" in md
    assert "GPy at N = 64: skipped: no_such_module_for_fastgp_smoke is not installed" in md
    assert "Placeholder" in md  # tiny N: the file says it is not the real figures
    # no past-one-buffer rows unless asked for (--vecchia-sizes)
    assert "vecchia" not in doc and "Past one buffer" not in md


def test_compare_classifier_rows_fastgp_against_sklearn(tmp_path):
    argv = ["--sizes", "40", "--problems", "gpc", "--peers", "fastgp,sklearn",
            "--fit-n", "40", "--fit-max-iter", "50", "--repeats", "1", "--no-plots",
            "--in-process", "--out-dir", str(tmp_path)]
    assert compare.main(argv) == 0

    doc = json.loads((tmp_path / "comparison.json").read_text())
    by = {c["library"]: c for c in doc["cases"] if c["kind"] == "loss_grad"}
    assert sorted(by) == ["fastgp-gpc", "sklearn-gpc"]
    for case in by.values():
        assert (case["status"], case["problem"], case["kind"]) == ("ok", "gpc", "loss_grad"), case
        assert case["time"]["loss_grad"]["median_s"] > 0 and case["time"]["loss"]["median_s"] > 0
        # no LAPACK floor on the classifier's noise-free K (bench/_problems.py says why)
        assert not case["with_floor"] and "floor-potrf" not in case["time"]
    # the same Laplace approximation, its value and gradient, in both libraries
    np.testing.assert_allclose(by["fastgp-gpc"]["value"], by["sklearn-gpc"]["value"], rtol=1e-8)
    np.testing.assert_allclose(by["fastgp-gpc"]["grad_theta"], by["sklearn-gpc"]["grad_theta"],
                               rtol=1e-8)

    md = (tmp_path / "comparison.md").read_text()
    assert "| 40 | fastgp GaussianProcessClassifier |" in md
    assert "| 40 | scikit-learn GaussianProcessClassifier |" in md
    assert "No floor row" in md

    # the fits, each also scored by fastgp's classifier at its optimum
    fits = {c["library"]: c for c in doc["cases"] if c["kind"] == "fit"}
    assert [fits[lib]["status"] for lib in ("fastgp-gpc", "sklearn-gpc")] == ["ok", "ok"]
    fast_fit, sk_fit = fits["fastgp-gpc"]["fit"], fits["sklearn-gpc"]["fit"]
    assert fast_fit["n_evaluations"] > 1
    np.testing.assert_allclose(fast_fit["final_nlml"], sk_fit["final_nlml"], rtol=1e-6)
    np.testing.assert_allclose(sk_fit["reference_nlml"], sk_fit["final_nlml"], rtol=1e-8)
    assert "| gpc | 40 | scikit-learn GaussianProcessClassifier |" in md


def test_compare_parses_the_past_one_buffer_options():
    args = compare.parse_args([])
    assert (args.vecchia_sizes, args.vecchia_m, args.gpboost_python) == ([], 20, None)
    args = compare.parse_args(["--vecchia-sizes", "5000,1e5", "--vecchia-m", "30",
                               "--gpboost-python", "gpboost-python", "--max-n", "2000",
                               "--problems", ""])
    # --max-n caps the exact path's sizes, not these
    assert args.vecchia_sizes == [5000, 100000] and args.vecchia_m == 30
    assert args.gpboost_python == "gpboost-python" and args.problems == []


def test_compare_runs_the_vecchia_rows_and_skips_a_missing_gpboost(tmp_path):
    # --problems "": the past-one-buffer rows alone, fastgp's in a fresh
    # process; GPBoost's interpreter does not exist, so its row is skipped
    missing = tmp_path / "no-such-python"
    argv = ["--problems", "", "--vecchia-sizes", "500", "--vecchia-m", "10",
            "--gpboost-python", str(missing), "--no-plots", "--out-dir", str(tmp_path)]
    assert compare.main(argv) == 0
    doc = json.loads((tmp_path / "comparison.json").read_text())
    assert doc["cases"] == [] and doc["settings"]["vecchia_sizes"] == [500]
    (row,) = doc["vecchia"]
    assert (row["n"], row["m"], row["threads"]) == (500, 10, 2)
    assert row["fastgp"]["status"] == "ok", row["fastgp"]
    assert row["fastgp"]["fit_s"] > 0 and 0 < row["fastgp"]["scores"]["RMSE"] < 1
    assert row["gpboost"]["status"] == "skipped"
    assert "no Python interpreter" in row["gpboost"]["reason"]
    md = (tmp_path / "comparison.md").read_text()
    assert "## Past one buffer: Vecchia's approximation against GPBoost's" in md
    assert '| 500 | fastgp `solver="vecchia"` |' in md
    assert 'GPBoost `gp_approx="vecchia"` at N = 500: skipped: no Python interpreter' in md
    assert "Placeholder" in md  # N = 500: not the figures that count


def test_compare_vecchia_table_gives_gpboosts_fit_time_over_fastgps():
    from bench._report import render_markdown

    def side(fit_s):
        return {"status": "ok", "fit_s": fit_s, "predict_s": 0.5, "peak_rss_bytes": 2**29,
                "scores": {"RMSE": 0.1029, "CRPS": 0.0581, "coverage": 0.95}}

    doc = {"command": "python -m bench.compare", "quick": False, "cases": [],
           "settings": {"sizes": [], "problems": []},
           "environment": {"versions": {}, "date_utc": "now", "cpu_model": "cpu",
                           "cpu_count": 2, "memory_total_gb": 1.0,
                           "memory_available_gb": 1.0, "platform": "linux", "python": "3"},
           "vecchia": [{"n": 100000, "m": 20, "threads": 2, "n_query": 10000,
                        "fastgp": side(4.0), "gpboost": side(130.0)}]}
    md = render_markdown(doc)
    assert ('| 100,000 | GPBoost `gp_approx="vecchia"` | 130 | 0.5 | 0.1029 | 0.0581 | '
            '0.950 | 512 | 32.5 |') in md
    assert '| 100,000 | fastgp `solver="vecchia"` | 4 | 0.5 |' in md
    assert "m = 20 neighbours" in md and "Placeholder" not in md


def test_compare_skips_cases_estimated_not_to_fit(tmp_path, monkeypatch):
    monkeypatch.setattr(compare, "available_memory_bytes", lambda: 2**20)  # 1 MB free
    assert compare.main(_tiny_args(tmp_path, "fastgp")) == 0
    doc = json.loads((tmp_path / "comparison.json").read_text())
    assert doc["cases"] and all(c["status"] == "skipped" for c in doc["cases"])
    assert all("estimated" in c["reason"] for c in doc["cases"])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_case_runs_in_a_fresh_process_and_reports_its_memory():
    spec = dict(library="fastgp", problem="1d", n=200, kind="loss_grad", repeats=1,
                with_floor=True)
    result = run_in_subprocess("bench._worker", spec, timeout_s=300)
    assert result["status"] == "ok", result
    assert result["memory"]["method"] == "VmHWM reset"
    # at least the one N x N buffer, and far from scikit-learn's tenfold
    assert 0.9 < result["memory"]["multiple_of_8n2"] < 8
    adapter = get_adapter("fastgp")()
    problem = make_problem("1d", 200)
    adapter.prepare(problem)
    np.testing.assert_allclose(result["value"], adapter.loss(problem.theta0), rtol=1e-12)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_peak_memory_sees_an_allocation_inside_the_block_only():
    before = np.ones(20 * 2**20 // 8)  # 20 MB before the block: not counted
    with PeakMemory() as mem:
        inside = np.ones(40 * 2**20 // 8)
        del inside
    assert 35 < mem.delta_bytes / 2**20 < 60
    del before


def test_targets_are_met_or_not_from_the_ratios():
    def case(library, n, lg, mem_mb, floor=None):
        time = {"loss_grad": {"median_s": lg}, "loss": {"median_s": lg / 3}}
        if floor:
            time["floor-potrf-potri"] = {"median_s": floor}
        return dict(library=library, problem="1d", n=n, kind="loss_grad", status="ok",
                    time=time, memory={"delta_mb": mem_mb,
                                       "multiple_of_8n2": mem_mb * 2**20 / (8.0 * n * n)})

    n = 5000
    mb = 8 * n * n / 2**20
    doc = {"cases": [case("fastgp", n, 1.0, 1.1 * mb, floor=0.9),
                     case("sklearn", n, 2.5, 12 * mb)]}
    rows = {r["target"]: r for r in evaluate_targets(doc)}
    assert rows["time_vs_floor"]["met"] and rows["memory_8n2"]["met"]
    assert not rows["time_vs_sklearn"]["met"]  # 2.5x < 3x
    assert rows["memory_vs_sklearn"]["met"]
    doc["cases"][0]["time"]["floor-potrf-potri"]["median_s"] = 0.5  # 2x the floor
    assert not {r["target"]: r for r in evaluate_targets(doc)}["time_vs_floor"]["met"]


#: Every benchmark script: bench/bench_*.py and the comparison command.
SCRIPTS = sorted(p.stem for p in (REPO_ROOT / "bench").glob("bench_*.py")) + ["compare"]


@pytest.mark.parametrize("name", SCRIPTS)
def test_bench_script_runs_as_a_module_with_a_main(name, capsys):
    # one way to run every script: python -m bench.NAME (relative imports,
    # argparse in main(argv), the __main__ guard), and its docstring says so
    module = importlib.import_module(f"bench.{name}")
    with pytest.raises(SystemExit) as exit_info:
        module.main(["--help"])
    assert exit_info.value.code == 0
    assert "usage:" in capsys.readouterr().out
    assert f"python -m bench.{name}" in module.__doc__
    assert "python bench/" not in module.__doc__
    source = Path(module.__file__).read_text()
    assert 'if __name__ == "__main__":' in source
    assert "sys.path.insert" not in source


def test_bench_suites_collect_and_run_once_at_a_tiny_n():
    # the pytest-benchmark suites (bench/suites), each benchmark run once
    env = dict(os.environ, FASTGP_BENCH_SIZES="64")
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "bench/suites", "--benchmark-disable", "-v",
         "-p", "no:cacheprovider"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for suite in (REPO_ROOT / "bench" / "suites").glob("test_bench_*.py"):
        assert f"bench/suites/{suite.name}::" in out.stdout, suite.name
    assert "N=64" in out.stdout


def test_bench_subnormal_counts_and_flushes(tmp_path):
    from bench import bench_subnormal

    A = np.eye(4)
    A[2, 0] = 1e-310  # subnormal, in the lower triangle
    A[0, 3] = 1e-310  # upper triangle: not counted
    assert bench_subnormal.subnormal_count(A) == 1
    out = tmp_path / "subnormal.json"
    assert bench_subnormal.main(["--n", "200", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert [r["matrix"] for r in doc["results"]] == ["seattle start", "seattle fitted",
                                                     "synthetic 1d"]
    for row in doc["results"]:
        assert row["dpotrf_s"] > 0 and row["flushed_dpotri_s"] > 0
        assert abs(row["log_det_change"]) < 1e-8 and row["Kinv_relative_change"] < 1e-8


def test_bench_blocked_threshold_times_both_paths_and_refuses_crashing_sizes(tmp_path):
    from bench import bench_blocked_threshold

    out = tmp_path / "blocked.json"
    assert bench_blocked_threshold.main(["--sizes", "50,70", "--repeats", "1",
                                         "--block", "16", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["block"] == 16 and [r["n"] for r in doc["results"]] == [50, 70]
    for row in doc["results"]:
        assert set(row["median_s"]) == set(bench_blocked_threshold.STEPS)
        assert all(t > 0 for t in row["median_s"].values())
        assert row["fastgp_path"] == "tiled"  # a fit's path at every order
    with pytest.raises(SystemExit):
        bench_blocked_threshold.main(["--sizes", "16000", "--out", str(out)])


@pytest.mark.parametrize("library, problem", [("fastgp", "1d"), ("fastgp-gplvm", "gplvm")])
def test_timed_rounds_run_each_adapters_between_calls(library, problem, monkeypatch):
    """The interleaved rounds call the adapter's untimed between_calls
    before each timed loss+gradient and loss (fastgp: OpenBLAS's workers
    put to sleep, as in a fit)."""
    import fastgp._linalg.blas_pool
    from bench import _worker

    calls = []
    real = fastgp._linalg.blas_pool.release_blas_workers
    monkeypatch.setattr(fastgp._linalg.blas_pool, "release_blas_workers",
                        lambda: calls.append(1) or real())
    spec = dict(library=library, problem=problem, n=60, kind="loss_grad", repeats=2)
    result = _worker.run_case(spec)
    assert set(result["time"]) == {"loss_grad", "loss"}
    with_between = len(calls)
    calls.clear()
    monkeypatch.setattr(get_adapter(library), "between_calls", None)
    _worker.run_case(spec)
    # the objective puts the workers to sleep itself too; between_calls adds
    # one before each of the two rounds' two timed calls
    assert with_between - len(calls) == 2 * 2


def test_bench_vecchia_cases_run_at_a_tiny_n(tmp_path, monkeypatch, capsys):
    from bench import bench_vecchia

    monkeypatch.setattr(bench_vecchia, "RESULTS", tmp_path)
    assert bench_vecchia.main(["--case", "crossover", "--sizes", "300", "--repeats", "1"]) == 0
    assert bench_vecchia.main(["--case", "memory", "--sizes", "2000", "--m", "10"]) == 0
    printed = capsys.readouterr().out
    assert "N =    300: loss+gradient cholesky" in printed
    assert "matern2d N = 2,000, m = 10: fit (no optimiser) peak" in printed
    memory = json.loads((tmp_path / "vecchia-memory.json").read_text())["result"]
    assert memory[0]["status"] == "ok" and memory[0]["estimate_bytes"] > 0


@pytest.mark.parametrize("text, span", [
    ("This fit may take 24 s to 118 s: its first evaluation ...", (24.0, 118.0)),
    ("This fit may take about 2.5 min: its first ...", (150.0, 150.0)),
    ("This fit may take 38 s to 3.1 min: its ...", (38.0, 186.0)),
    (None, (None, None)),
])
def test_fit_notice_bench_reads_the_notices_range(text, span):
    from bench.bench_fit_notice import notice_span

    got = notice_span(text)
    assert got == (span if span[0] is None else pytest.approx(span))
