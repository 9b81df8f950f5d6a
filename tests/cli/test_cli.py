"""``python -m fastgp`` and the ``fastgp`` console command (fastgp.cli)."""

import os
import pathlib
import re
import shlex
import subprocess
import sys
from importlib.metadata import entry_points

import numpy as np
import pytest

from fastgp import cli
from fastgp._cli.fit import KERNEL_FAMILIES

FLOAT = r"-?\d+\.\d+"


def _run_module(*args, threads=1):
    # One BLAS and one Numba thread by default: at N = 200 thread start-up
    # and waits dominate on a busy 2-core runner (8 s against 2.4 s
    # measured); the thread count does not change the numbers (tested
    # elsewhere). threads=None: the machine's own.
    env = dict(os.environ)
    if threads is not None:
        env.update({name: str(threads) for name in ("OPENBLAS_NUM_THREADS",
                                                    "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                                    "NUMBA_NUM_THREADS")})
    return subprocess.run([sys.executable, "-m", "fastgp", *args], env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # a new process fits the whole main job (about 20 s on 2 cores)
def test_python_m_fastgp_fits_and_prints_the_summary():
    result = _run_module("--quiet", threads=None)
    assert result.returncode == 0, result.stderr
    # the weekly kernel converges inside its bounds: nothing on stderr, no
    # bound warning; only the long-fit notice may be there, since it reads
    # this machine's load (the first evaluation's time: 0.66 s measured with
    # another test process on both cores, "24 s to 118 s", where quiet the
    # fit takes about 20 s and says nothing)
    printed = result.stderr.splitlines()
    assert all(line.startswith("fastgp: LongFitWarning: ") for line in printed), result.stderr
    out = result.stdout
    assert re.search(r"^fastgp: Mauna Loa CO2, 2225 weekly means, 10 hyperparameters$",
                     out, re.M)
    assert re.search(r"^start kernel: .*RBF", out, re.M)
    assert re.search(r"^fitted kernel: .*RBF", out, re.M)
    lml = float(re.search(rf"^log marginal likelihood: ({FLOAT})$", out, re.M).group(1))
    iterations = re.search(r"^iterations: (\d+), objective evaluations: (\d+)$", out, re.M)
    assert 0 < int(iterations.group(1)) <= int(iterations.group(2))
    assert re.search(rf"^wall time: {FLOAT} s", out, re.M)
    assert re.search(r"^peak resident memory: \d+ MB", out, re.M)
    # --quiet: no per-iteration progress
    assert not re.search(r"^iter\s", out, re.M)
    # the optimum of R&W's kernel on this series (cli.weekly_co2_kernel), far
    # above the start
    assert lml == pytest.approx(-883.617, abs=0.01)
    assert lml > _start_lml() + 1000


def _start_lml():
    """Log marginal likelihood of the command's start kernel on its data."""
    import warnings

    from fastgp import GaussianProcessRegressor
    from fastgp.datasets import load_mauna_loa_co2

    X, y = load_mauna_loa_co2()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gpr = GaussianProcessRegressor(cli.weekly_co2_kernel(), optimizer=None)
        gpr.fit(X, y - y.mean())
    return gpr.log_marginal_likelihood_value_


@pytest.mark.slow  # a new process: warnings as the console shows them
def test_cli_prints_each_warning_as_one_line_of_its_own(tmp_path):
    # targets of pure noise: the length scale runs to its upper bound, and
    # scikit-learn's bound warning is printed as one line, without Python's
    # file name and source line ("warnings.warn(", "sys.exit(main())")
    rng = np.random.default_rng(0)
    data = _write_csv(tmp_path / "noise.csv", ["x", "y"],
                      zip(np.linspace(0, 1, 30), rng.standard_normal(30)))
    result = _run_module("fit", str(data), "--target", "y", "--quiet")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert any(line.startswith("fastgp: ConvergenceWarning: The optimal value found for")
               for line in lines), result.stderr
    assert all(line.startswith("fastgp: ") for line in lines), result.stderr


def test_cli_restores_the_warning_format(monkeypatch, capsys):
    import warnings

    before = warnings.formatwarning
    seen = []
    monkeypatch.setattr(cli, "_mauna_loa", lambda args, parser: seen.append(
        warnings.formatwarning("text", UserWarning, "file.py", 3, "source line")) or 0)
    assert cli.main(["--quiet"]) == 0
    assert seen == ["fastgp: UserWarning: text\n"]
    assert warnings.formatwarning is before


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("compiled", [[], [12.34]])
def test_cli_names_numbas_compilation_only_where_it_happened(compiled, monkeypatch, capsys):
    from contextlib import contextmanager

    import fastgp._fit.clock as clock

    @contextmanager
    def compiling_seconds():
        yield compiled

    monkeypatch.setattr(clock, "compiling_seconds", compiling_seconds)
    assert cli.main(["--n-samples", "40", "--quiet"]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines()
               if line.startswith("wall time:")]
    if compiled:
        assert line.endswith(" s (of which 12.3 s Numba compiling fastgp's routines, once "
                             "per install: later runs load them from its cache)")
    else:
        assert re.fullmatch(rf"wall time: {FLOAT} s", line)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_cli_main_prints_progress_per_iteration(capsys):
    assert cli.main(["--n-samples", "40"]) == 0
    out = capsys.readouterr().out
    progress = [line for line in out.splitlines() if line.startswith("iter ")]
    n_iter = int(re.search(r"^iterations: (\d+),", out, re.M).group(1))
    assert len(progress) == n_iter > 0
    assert re.match(r"iter\s+1\s+-log p\(y\|X\)\s+\S+\s+\|grad\|\s+\S+", progress[0])
    # the time per iteration, the last evaluation's, the time elapsed and
    # the time to go on every line
    assert all(re.search(r"\|grad\| \S+  \S+ s/iter  eval \S+ s  elapsed \S+ \S+  "
                         r"(ETA |past typical)", line) for line in progress)
    assert "fastgp: Mauna Loa CO2, 40 weekly means" in out


def test_cli_rejects_unknown_optimizer(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--optimizer", "BFGS"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_console_command_points_at_cli_main():
    (entry,) = entry_points(group="console_scripts", name="fastgp")
    assert entry.value == "fastgp.cli:main"
    assert entry.load() is cli.main


@pytest.mark.parametrize("value", ["-5", "0", "10000000"])
def test_cli_rejects_n_samples_out_of_range_with_usage_error(value, capsys):
    # -5 used to drop the last five weeks in silence, 0 to end in a traceback
    with pytest.raises(SystemExit) as info:
        cli.main(["--n-samples", value, "--quiet"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--n-samples: must be between 1 and" in err and value in err
    assert "Traceback" not in err


def test_cli_version_and_optimizer_help(capsys):
    import fastgp

    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"fastgp {fastgp.__version__}"
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--optimizer {fmin_l_bfgs_b,CG}" in help_text
    assert "conjugate gradients" in help_text and "L-BFGS-B" in help_text


def test_cli_fit_help_states_the_default_kernels_starts_and_bounds(capsys):
    from fastgp._cli.fit import default_kernel

    with pytest.raises(SystemExit):
        cli.main(["fit", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    noise = re.search(r"noise's \((\S+), bounds (\S+) to (\S+)\)", help_text)
    scales = re.search(r"within (\S+) to (\S+) times it", help_text)
    assert noise and scales, help_text
    X = np.column_stack([np.linspace(0, 1, 20), np.linspace(0, 10, 20)])
    kernel = default_kernel(X)
    white, rbf = kernel.k2, kernel.k1.k2
    stated = [float(v) for v in noise.groups()]
    assert stated == pytest.approx([white.noise_level, *white.noise_level_bounds])
    ratios = np.asarray(rbf.length_scale_bounds) / np.asarray(rbf.length_scale)[:, None]
    assert [float(v) for v in scales.groups()] == pytest.approx(ratios[0].tolist())


# ---------------------------------------------------------------- verbosity

def test_cli_verbosity_options_parse_and_exclude_each_other(capsys):
    parser, _ = cli.build_parser()
    assert parser.parse_args([]).verbose == cli.VERBOSE  # progress by default, as before
    assert parser.parse_args(["--verbose"]).verbose == cli.VERBOSE
    assert parser.parse_args(["--quiet"]).verbose == cli.QUIET
    assert parser.parse_args([]).command is None
    for argv in (["--verbose", "--quiet"], ["fit", "d.csv", "--target", "y", "--quiet",
                                            "--verbose"]):
        with pytest.raises(SystemExit) as info:
            parser.parse_args(argv)
        assert info.value.code == 2
        assert "not allowed with argument" in capsys.readouterr().err


def _progress_lines(out):
    return [line for line in out.splitlines() if line.startswith("iter ")]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_cli_quiet_prints_the_results_and_no_progress(capsys):
    assert cli.main(["--n-samples", "40", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert _progress_lines(out) == []
    assert int(re.search(r"^iterations: (\d+),", out, re.M).group(1)) > 0
    assert re.search(rf"^log marginal likelihood: {FLOAT}$", out, re.M)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_cli_verbose_prints_a_line_per_iteration(capsys):
    assert cli.main(["--n-samples", "40", "--verbose"]) == 0
    out = capsys.readouterr().out
    n_iter = int(re.search(r"^iterations: (\d+),", out, re.M).group(1))
    assert len(_progress_lines(out)) == n_iter > 0


# ---------------------------------------------------------------- fastgp fit

N_ROWS = 60


def _write_csv(path, header, rows):
    path.write_text("\n".join([",".join(header), *(",".join(map(str, r)) for r in rows)])
                    + "\n")
    return path


@pytest.fixture
def data_csv(tmp_path):
    """N_ROWS rows: y = sin(a) + 0.5 b + noise, a text column and an unused one."""
    rng = np.random.default_rng(0)
    a = rng.uniform(0, 6, N_ROWS)
    b = rng.uniform(-1, 1, N_ROWS)
    y = np.sin(a) + 0.5 * b + 0.05 * rng.standard_normal(N_ROWS)
    rows = [(f"s{i}", a[i], b[i], 7.0, y[i]) for i in range(N_ROWS)]
    return _write_csv(tmp_path / "data.csv", ["id", "a", "b", "unused", "y"], rows)


def _fit(argv, capsys):
    assert cli.main(["fit", *map(str, argv)]) == 0
    return capsys.readouterr().out


def test_cli_fit_options_parse():
    parser, _ = cli.build_parser()
    args = parser.parse_args(["fit", "d.csv", "--target", "y"])
    assert (args.command, args.csv, args.target, args.inputs) == ("fit", "d.csv", "y", None)
    assert (args.kernel, args.solver, args.optimizer) == ("rbf", "auto", "fmin_l_bfgs_b")
    assert (args.model, args.predictions, args.test_fraction) == (None, None, None)
    assert args.verbose == cli.VERBOSE
    args = parser.parse_args(
        ["--quiet", "--optimizer", "CG", "fit", "d.csv", "--target", "y", "--inputs", "a,b",
         "--kernel", "matern52", "--solver", "vecchia", "--test-fraction", "0.2",
         "--seed", "3", "--n-restarts", "2", "--model", "m.joblib",
         "--predictions", "p.csv"])
    # options of the top level given before `fit` stand
    assert (args.verbose, args.optimizer) == (cli.QUIET, "CG")
    assert (args.inputs, args.kernel, args.solver) == ("a,b", "matern52", "vecchia")
    assert (args.test_fraction, args.seed, args.n_restarts) == (0.2, 3, 2)
    assert (args.model, args.predictions) == ("m.joblib", "p.csv")
    assert parser.parse_args(["fit", "d.csv", "--target", "y", "--quiet"]).verbose == cli.QUIET


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_cli_fit_writes_a_model_that_loads_and_predicts(data_csv, tmp_path, capsys):
    joblib = pytest.importorskip("joblib")  # scikit-learn's dependency
    model, predictions = tmp_path / "model.joblib", tmp_path / "predictions.csv"
    out = _fit([data_csv, "--target", "y", "--inputs", "a,b", "--model", model,
                "--predictions", predictions, "--quiet"], capsys)
    assert _progress_lines(out) == []
    assert re.search(r"^fitted kernel: .*RBF\(length_scale=\[.*\]\) \+ WhiteKernel", out, re.M)
    lml = float(re.search(rf"^log marginal likelihood: ({FLOAT})$", out, re.M).group(1))
    r2 = float(re.search(rf"^in-sample R\^2: ({FLOAT}), RMSE", out, re.M).group(1))
    assert re.search(rf"^fit time: {FLOAT} s", out, re.M)
    assert "held-out" not in out

    gpr = joblib.load(model)
    rng = np.random.default_rng(1)
    X_new = np.column_stack([rng.uniform(0, 6, 5), rng.uniform(-1, 1, 5)])
    assert gpr.predict(X_new).shape == (5,)
    assert gpr.log_marginal_likelihood_value_ == pytest.approx(lml, abs=1e-4)
    # the model learnt y = sin(a) + 0.5 b, not noise
    np.testing.assert_allclose(gpr.predict(X_new), np.sin(X_new[:, 0]) + 0.5 * X_new[:, 1],
                               atol=0.2)

    table = np.genfromtxt(predictions, delimiter=",", names=True)
    assert table.dtype.names == ("a", "b", "y", "predicted_mean", "predicted_std")
    assert len(table) == N_ROWS
    X = np.column_stack([table["a"], table["b"]])
    mean, std = gpr.predict(X, return_std=True)
    np.testing.assert_allclose(table["predicted_mean"], mean, rtol=1e-12)
    np.testing.assert_allclose(table["predicted_std"], std, rtol=1e-12)
    assert 1 - np.sum((table["y"] - mean) ** 2) / np.sum((table["y"] - table["y"].mean()) ** 2) \
        == pytest.approx(r2, abs=1e-4)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_cli_fit_verbose_holds_out_rows_and_scores_them(data_csv, tmp_path, capsys):
    predictions = tmp_path / "predictions.csv"
    out = _fit([data_csv, "--target", "y", "--inputs", "a,b", "--kernel", "matern52",
                "--test-fraction", "0.25", "--predictions", predictions, "--verbose"], capsys)
    n_iter = int(re.search(r"^iterations: (\d+),", out, re.M).group(1))
    assert len(_progress_lines(out)) == n_iter > 0
    assert "Matern(length_scale=[" in out and "nu=2.5" in out
    n_test = round(0.25 * N_ROWS)
    assert f"{N_ROWS - n_test} fitted, {n_test} held out" in out
    held = re.search(rf"^held-out R\^2: ({FLOAT}), RMSE: (\S+) \({n_test} rows\)$", out, re.M)
    table = np.genfromtxt(predictions, delimiter=",", names=True)
    assert table.dtype.names[-1] == "held_out" and len(table) == N_ROWS
    test = table["held_out"] == 1
    assert test.sum() == n_test
    residual = table["y"][test] - table["predicted_mean"][test]
    assert float(held.group(2)) == pytest.approx(np.sqrt(np.mean(residual ** 2)), rel=1e-5)
    assert float(held.group(1)) > 0.5  # a smooth function of a and b, predicted


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_cli_fit_model_never_saw_a_held_out_row(data_csv, tmp_path, capsys):
    # the saved model's training rows are exactly the rows the predictions
    # file marks as fitted: none of the held-out ones, whose scores the
    # output reports
    model, predictions = tmp_path / "model.joblib", tmp_path / "predictions.csv"
    out = _fit([data_csv, "--target", "y", "--inputs", "a,b", "--test-fraction", "0.3",
                "--model", model, "--predictions", predictions, "--quiet"], capsys)
    import joblib

    gpr = joblib.load(model)
    table = np.genfromtxt(predictions, delimiter=",", names=True)
    held = table["held_out"] == 1
    inputs = [tuple(row) for row in np.column_stack([table["a"], table["b"]])]
    seen = {tuple(row) for row in gpr.X_train_}
    assert len(set(inputs)) == N_ROWS  # every row's inputs tell it apart
    assert held.sum() == round(0.3 * N_ROWS) and len(gpr.X_train_) == N_ROWS - held.sum()
    assert seen == {row for row, out_ in zip(inputs, held) if not out_}
    assert f"{N_ROWS - held.sum()} fitted, {held.sum()} held out" in out


def test_cli_fit_default_kernel_scales_with_the_inputs():
    from fastgp._cli.fit import LENGTH_SCALE_RANGE, default_kernel

    X = np.column_stack([np.linspace(0, 1, 20), np.linspace(0, 1000, 20),
                         np.full(20, 5.0)])
    kernel = default_kernel(X)
    rbf = kernel.k1.k2
    expected = np.array([X[:, 0].std(), X[:, 1].std(), 1.0])  # a constant input: 1
    np.testing.assert_allclose(rbf.length_scale, expected)
    np.testing.assert_allclose(rbf.length_scale_bounds,
                               np.outer(expected, LENGTH_SCALE_RANGE))
    assert kernel.k2.noise_level == pytest.approx(0.1)


@pytest.mark.parametrize("family", KERNEL_FAMILIES)
def test_cli_fit_default_kernel_starts_inside_its_bounds(family):
    """Every hyperparameter of the default kernel starts strictly inside its
    bounds (a start outside would be clipped to a bound by the optimiser), and
    the noise may fall well below its start (a nearly noise-free fit stays
    reachable)."""
    from fastgp._cli.fit import default_kernel

    X = np.column_stack([np.linspace(0, 1, 20), np.linspace(0, 1000, 20)])
    kernel = default_kernel(X, family)
    low, high = kernel.bounds[:, 0], kernel.bounds[:, 1]
    assert np.all(low < kernel.theta) and np.all(kernel.theta < high)
    noise_low, _ = kernel.k2.noise_level_bounds
    assert noise_low < 1e-3 * kernel.k2.noise_level


def _fit_fails(argv, capsys):
    """Run ``fastgp fit argv``; check it is a usage error (status 2, no
    traceback, no fit) and return its message."""
    with pytest.raises(SystemExit) as info:
        cli.main(["fit", *map(str, argv)])
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert "fitted kernel" not in captured.out
    assert "usage: fastgp fit" in captured.err and "Traceback" not in captured.err
    return captured.err


def test_cli_fit_missing_file_is_a_usage_error(tmp_path, capsys):
    err = _fit_fails([tmp_path / "nowhere.csv", "--target", "y"], capsys)
    assert "nowhere.csv: no such file" in err


@pytest.mark.parametrize("argv, message", [
    (["--target", "z"], r"unknown column 'z' in .*data\.csv; its columns are: id, a, b, "
                        r"unused, y"),
    (["--target", "y", "--inputs", "a,q,r"], r"unknown columns 'q', 'r'"),
    (["--target", "y", "--inputs", "a,,b"], r"--inputs: an empty column name"),
    (["--target", "y", "--inputs", "a,y"], r"the target 'y' cannot be an input"),
    (["--target", "y", "--inputs", "a,a"], r"'a' given more than once"),
    # without --inputs every other column is an input, the text one too
    (["--target", "y"], r"column 'id' of .*data\.csv has a non-numeric value 's0' on "
                        rf"line 2 \(and {N_ROWS - 1} more\)"),
    (["--target", "y", "--test-fraction", "1.5"], r"--test-fraction: must be between 0 "
                                                  r"and 1"),
    (["--target", "y", "--inputs", "a", "--test-fraction", "0.01"],
     r"--test-fraction: 0.01 of 60 rows holds out 1"),
    (["--target", "y", "--kernel", "linear"], r"--kernel: invalid choice: 'linear'"),
])
def test_cli_fit_bad_arguments_are_usage_errors(data_csv, argv, message, capsys):
    assert re.search(message, _fit_fails([data_csv, *argv], capsys))


@pytest.mark.parametrize("cell, message", [
    ("", r"column 'b' of .*bad\.csv has a missing value \(NaN or an empty cell\) on line 4"),
    ("NaN", r"column 'b' .* missing value .* on line 4"),
    ("inf", r"column 'b' .* an infinite value 'inf' on line 4"),
    ("1,5", r"line 4 of .*bad\.csv has 4 cells, its header 3"),
    ("abc", r"column 'b' .* a non-numeric value 'abc' on line 4"),
])
def test_cli_fit_bad_cells_are_usage_errors(tmp_path, cell, message, capsys):
    rows = [(i, i * 0.5, i ** 2) for i in range(5)]
    rows[2] = (2, cell, 4)  # the third data row: line 4
    path = _write_csv(tmp_path / "bad.csv", ["a", "b", "y"], rows)
    assert re.search(message, _fit_fails([path, "--target", "y"], capsys))


@pytest.mark.parametrize("text, message", [
    ("a,y\n1,2\n", r"has 1 data row: a GP fit needs at least 2"),
    ("a,y\n", r"has 0 data rows"),
    ("", r"is empty: it needs a header line"),
    ("a,a,y\n1,2,3\n4,5,6\n", r"names the column 'a' more than once"),
])
def test_cli_fit_too_few_rows_or_a_bad_header_is_a_usage_error(tmp_path, text, message,
                                                               capsys):
    path = tmp_path / "small.csv"
    path.write_text(text)
    assert re.search(message, _fit_fails([path, "--target", "y"], capsys))


def test_cli_fit_checks_the_output_files_before_the_fit(data_csv, tmp_path, capsys):
    err = _fit_fails([data_csv, "--target", "y", "--inputs", "a",
                      "--model", tmp_path / "no" / "m.joblib"], capsys)
    assert "--model: the folder" in err and "does not exist" in err
    err = _fit_fails([data_csv, "--target", "y", "--inputs", "a",
                      "--model", tmp_path / "same", "--predictions", tmp_path / "same"],
                     capsys)
    assert "the same file" in err


def test_cli_mauna_loa_options_are_refused_with_fit(data_csv, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--n-samples", "40", "fit", str(data_csv), "--target", "y"])
    assert info.value.code == 2
    assert "--n-samples and --plot are options of the Mauna Loa fit" in \
        capsys.readouterr().err


DOCS_FIT_EXAMPLE = re.compile(r"^python -m fastgp (fit tests/data/fit_example\.csv .*)$",
                              re.M)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_cli_fit_example_of_the_docs_runs(tmp_path, monkeypatch, capsys):
    root = pathlib.Path(__file__).resolve().parents[2]
    (command,) = DOCS_FIT_EXAMPLE.findall((root / "docs" / "quickstart.md").read_text())
    argv = shlex.split(command)
    argv[1] = str(root / argv[1])  # the shipped file, run from elsewhere
    monkeypatch.chdir(tmp_path)  # where the example writes its files
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "inputs x1, x2, x3" in out
    for option in ("--model", "--predictions"):
        if option in argv:
            assert (tmp_path / argv[argv.index(option) + 1]).stat().st_size > 0


def test_cli_fit_mean_options_parse():
    parser, _ = cli.build_parser()
    args = parser.parse_args(["fit", "d.csv", "--target", "y"])
    assert (args.mean, args.mean_method) == ("none", "reml")
    args = parser.parse_args(["fit", "d.csv", "--target", "y", "--mean", "linear",
                              "--mean-method", "profile"])
    assert (args.mean, args.mean_method) == ("linear", "profile")
    with pytest.raises(SystemExit):
        parser.parse_args(["fit", "d.csv", "--target", "y", "--mean", "quadratic"])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("method", ["reml", "profile"])
def test_cli_fit_mean_reaches_the_estimator_and_prints_its_coefficients(
        data_csv, tmp_path, capsys, method):
    joblib = pytest.importorskip("joblib")
    model = tmp_path / "model.joblib"
    out = _fit([data_csv, "--target", "y", "--inputs", "a,b", "--mean", "linear",
                "--mean-method", method, "--model", model, "--quiet"], capsys)
    gpr = joblib.load(model)
    assert (gpr.mean, gpr.mean_method) == ("linear", method)
    number = r"-?[0-9.]+(?:e[-+]\d+)?"  # as :g writes them
    line = re.search(rf"^mean \(linear, {method}; standard errors in brackets\): "
                     rf"intercept ({number}) \(({number})\), a ({number}) \(({number})\), "
                     rf"b ({number}) \(({number})\)$", out, re.M)
    printed = np.array([float(v) for v in line.groups()]).reshape(3, 2)
    np.testing.assert_allclose(printed[:, 0], gpr.mean_coef_, rtol=1e-5)
    np.testing.assert_allclose(printed[:, 1], np.sqrt(np.diag(gpr.mean_coef_cov_)), rtol=1e-2)
    assert printed[2, 0] == pytest.approx(0.5, abs=0.15)  # y = sin(a) + 0.5 b + noise
    out = _fit([data_csv, "--target", "y", "--inputs", "a,b", "--quiet"], capsys)
    assert "mean (" not in out


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_cli_fit_solver_reaches_the_estimator(data_csv, capsys):
    out = _fit([data_csv, "--target", "y", "--inputs", "a,b", "--solver", "vecchia",
                "--quiet"], capsys)
    assert re.search(r"^solver: vecchia$", out, re.M)
