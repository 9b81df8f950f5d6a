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
