"""The benchmark commands of a mean estimated with the covariance run at a
tiny N (their figures are for a quiet machine: docs/design.md, "A mean
estimated with the covariance"; bench/bench_vecchia.py's gpboost-mean and
predict-neighbours cases)."""

import json

from bench import bench_mean, bench_vecchia


def test_bench_mean_compares_the_three_ways_at_a_tiny_n(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench_mean, "REPO_ROOT", tmp_path)
    (tmp_path / "bench" / "results").mkdir(parents=True)
    assert bench_mean.main(["--replicates", "2", "--n", "40"]) == 0
    printed = capsys.readouterr().out
    for way in ("profile", "reml", "oracle"):
        assert f"\n{way} " in printed
    result = json.loads((tmp_path / "bench" / "results" / "mean-method.json").read_text())
    assert set(result["result"]) == {"profile", "reml", "oracle"}
    assert len(result["rows"]["reml"]) == 2


def test_bench_vecchia_mean_cases_run_at_a_tiny_n(tmp_path, monkeypatch, capsys):
    # GPBoost's side is skipped where this environment has no gpboost
    monkeypatch.setattr(bench_vecchia, "RESULTS", tmp_path)
    assert bench_vecchia.main(["--case", "gpboost-mean", "--problem", "trend2d", "--n", "300",
                               "--m", "5", "--nu", "1.5", "--seeds", "0,1"]) == 0
    assert bench_vecchia.main(["--case", "predict-neighbours", "--problem", "heaton",
                               "--n", "300", "--m", "5", "--ms-predict", "5,10"]) == 0
    printed = capsys.readouterr().out
    assert "trend2d N = 300, Matern 1.5, m = 5:" in printed
    for ordering in ("random ordering 0", "random ordering 1", "maxmin ordering 0"):
        assert f"fastgp, {ordering}: fit" in printed
    assert "coefficients (standard errors)" in printed
    assert "fastgp over the random orderings: fit" in printed
    assert "heaton N = 300, m = 5: fit" in printed
    assert "on   10: RMSE" in printed
    mean = json.loads((tmp_path / "vecchia-gpboost-mean.json").read_text())["result"]
    assert mean["fastgp"]["status"] == "ok"
    assert [len(fit["coef"]) for fit in mean["fastgp"]["fits"]] == [3, 3, 3]
    summary = mean["summary"]["fastgp"]
    assert all(lo <= c <= hi for c, lo, hi in
               zip(summary["coef"], summary["coef_min"], summary["coef_max"]))


def test_fastgp_at_gpboosts_covariance_reads_gpboosts_parameter_order(tmp_path, monkeypatch):
    # fastgp's own estimates handed back as GPBoost's [nugget, variance,
    # range] must give fastgp's own likelihood and coefficients: a swapped
    # order would evaluate another covariance
    import numpy as np
    import pytest

    monkeypatch.setattr(bench_vecchia, "_quiet", lambda: None)
    monkeypatch.setattr(bench_vecchia, "_warm_up", lambda: None)
    X, y, X_test, y_test = bench_vecchia.mean_problem("trend2d", 300)
    np.savez(tmp_path / "data.npz", X=X, y=y, X_test=X_test, y_test=y_test)
    spec = dict(data=str(tmp_path / "data.npz"), seeds=[1], m=5, nu=1.5, method="profile")
    own = bench_vecchia.child_mean_fastgp(spec)["fits"]
    assert [fit["ordering"] for fit in own] == ["random", "maxmin"]
    again = bench_vecchia.child_mean_fastgp(dict(spec, gpboost_cov_pars=[own[0]["cov_pars"]]))
    there = again["fits"][0]["at_gpboost"]
    assert there["log_likelihood"] == pytest.approx(own[0]["log_likelihood"], rel=1e-9)
    np.testing.assert_allclose(there["coef"], own[0]["coef"], rtol=1e-7)
    assert "at_gpboost" not in again["fits"][1]  # maxmin has no GPBoost twin
