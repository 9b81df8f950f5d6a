"""``python -m fastgp`` and the ``fastgp`` console command (fastgp.cli)."""

import os
import re
import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from fastgp import cli

FLOAT = r"-?\d+\.\d+"


def _run_module(*args):
    # One BLAS and one Numba thread: at N = 200 thread start-up and waits
    # dominate on a busy 2-core runner (8 s against 2.4 s measured); the
    # thread count does not change the numbers (tested elsewhere).
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "fastgp", *args], env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # a new process fits the main job
def test_python_m_fastgp_fits_and_prints_the_summary():
    result = _run_module("--n-samples", "200", "--quiet")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert re.search(r"^fastgp: Mauna Loa CO2, 200 weekly means, \d+ hyperparameters$",
                     out, re.M)
    assert re.search(r"^start kernel: .*RBF", out, re.M)
    assert re.search(r"^fitted kernel: .*WhiteKernel", out, re.M)
    lml = float(re.search(rf"^log marginal likelihood: ({FLOAT})$", out, re.M).group(1))
    iterations = re.search(r"^iterations: (\d+), objective evaluations: (\d+)$", out, re.M)
    assert 0 < int(iterations.group(1)) <= int(iterations.group(2))
    assert re.search(rf"^wall time: {FLOAT} s", out, re.M)
    assert re.search(r"^peak resident memory: \d+ MB", out, re.M)
    # --quiet: no per-iteration progress
    assert not re.search(r"^iter\s", out, re.M)
    # the fit improved on the start kernel's likelihood
    assert lml > _start_lml(200)


def _start_lml(n_samples):
    """Log marginal likelihood of the CLI's start kernel on its data."""
    import warnings

    from fastgp import GaussianProcessRegressor
    from fastgp.datasets import load_mauna_loa_co2

    X, y = load_mauna_loa_co2()
    X, y = X[:n_samples], y[:n_samples]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gpr = GaussianProcessRegressor(cli.mauna_loa_kernel(), optimizer=None)
        gpr.fit(X, y - y.mean())
    return gpr.log_marginal_likelihood_value_


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_cli_main_prints_progress_per_iteration(capsys):
    assert cli.main(["--n-samples", "40"]) == 0
    out = capsys.readouterr().out
    progress = [line for line in out.splitlines() if line.startswith("iter ")]
    n_iter = int(re.search(r"^iterations: (\d+),", out, re.M).group(1))
    assert len(progress) == n_iter > 0
    assert re.match(r"iter\s+1\s+-log p\(y\|X\)\s+\S+\s+\|grad\|\s+\S+", progress[0])
    # the time per iteration on every line
    assert all(re.search(r"\|grad\| \S+  \S+ s/iter$", line) for line in progress)
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
