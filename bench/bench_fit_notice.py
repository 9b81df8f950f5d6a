"""Does the long-fit notice's range hold the fit's measured time?

    python -m bench.bench_fit_notice                       # every case
    python -m bench.bench_fit_notice --cases gplvm-digits,main-job
    python -m bench.bench_fit_notice --vecchia-sizes 300000

A fit whose first evaluation predicts more than 30 s says so once
(fastgp._fit.clock: "This fit may take A to B"): the evaluation's time
times the typical counts of evaluations of the fit's kind, compilation
excluded. Each case runs in a fresh process (its Numba routines loaded from
the cache by a small warm-up fit first), catches the notice, and times the
whole fit; the table gives the range, the measured time, and whether the
range holds it (and the measured time over the range's middle, the
geometric mean of its ends). Cases:

- ``gplvm-digits``: the GPLVM on scikit-learn's digits (1,797 x 64, 2
  components, the estimator's defaults);
- ``vecchia-N``: the regressor's defaults past 10,000 points with a noise
  term (solver "auto" picks Vecchia): y = sin(2 x_1) cos(x_2) + 0.3 x_2 +
  N(0, 0.1^2) on x uniform on [0, 4]^2, C * RBF([1, 1]) + WhiteKernel, at each
  N of ``--vecchia-sizes``;
- ``main-job``: ``python -m fastgp``'s fit (the Mauna Loa CO2 weekly means
  and ``fastgp.cli.weekly_co2_kernel()``), whose notice, when it fires, is
  the one a new user meets first.

Run it on an otherwise quiet machine. Writes bench/results/fit_notice.json.
"""

import argparse
import json
import re
import subprocess
import sys

from ._measure import REPO_ROOT, environment, write_json
from ._report import format_table

#: One case in a fresh process: warm up, fit, print the notice and the time.
CASE = r"""
import json, sys, time, warnings
import numpy as np

case = sys.argv[1]
if case == "gplvm-digits":
    from sklearn.datasets import load_digits
    from fastgp import GPLVM
    Y = load_digits().data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        GPLVM(n_components=2, max_iter=3, random_state=0).fit(Y[:100])
    make = lambda: GPLVM(n_components=2, random_state=0)
    data = (Y,)
elif case.startswith("vecchia-"):
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C
    from fastgp import GaussianProcessRegressor
    n = int(case.split("-")[1])
    rng = np.random.default_rng(0)
    X = rng.uniform(0.0, 4.0, size=(n, 2))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.3 * X[:, 1] + 0.1 * rng.standard_normal(n)
    kernel = C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        GaussianProcessRegressor(kernel, solver="vecchia", random_state=0).fit(X[:2000], y[:2000])
    make = lambda: GaussianProcessRegressor(kernel, random_state=0)
    data = (X, y)
else:
    from fastgp import GaussianProcessRegressor
    from fastgp.cli import weekly_co2_kernel
    from fastgp.datasets import load_mauna_loa_co2
    X, y = load_mauna_loa_co2()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        GaussianProcessRegressor(weekly_co2_kernel(), optimizer=None).fit(X[:200], y[:200])
    make = lambda: GaussianProcessRegressor(weekly_co2_kernel())
    data = (X, y - y.mean())
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    start = time.perf_counter()
    model = make().fit(*data)
    seconds = time.perf_counter() - start
notices = [str(w.message) for w in caught if type(w.message).__name__ == "LongFitWarning"]
print(json.dumps({"case": case, "seconds": seconds, "notice": notices[0] if notices else None,
                  "n_evaluations": int(getattr(model, "n_evaluations_", -1))}))
"""

#: "This fit may take 24 s to 118 s", "about 2.5 min", "1.2 min to 6 min"
_SPAN = re.compile(r"This fit may take (?:about )?([0-9.]+) (s|min|h)(?: to ([0-9.]+) (s|min|h))?")
_UNIT = {"s": 1.0, "min": 60.0, "h": 3600.0}


def notice_span(text):
    """(low, high) seconds of a notice's "may take" range; (None, None)
    without a notice."""
    match = _SPAN.search(text or "")
    if match is None:
        return None, None
    low = float(match[1]) * _UNIT[match[2]]
    high = low if match[3] is None else float(match[3]) * _UNIT[match[4]]
    return low, high


def run_case(case):
    proc = subprocess.run([sys.executable, "-c", CASE, case], capture_output=True, text=True,
                          cwd=REPO_ROOT, check=True)
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    row["low"], row["high"] = notice_span(row["notice"])
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="gplvm-digits,vecchia,main-job")
    parser.add_argument("--vecchia-sizes", default="300000,1000000")
    parser.add_argument("--out", default=REPO_ROOT / "bench/results/fit_notice.json")
    args = parser.parse_args(argv)
    cases = []
    for case in args.cases.split(","):
        if case == "vecchia":
            cases += [f"vecchia-{n}" for n in args.vecchia_sizes.split(",")]
        else:
            cases.append(case)
    rows = []
    for case in cases:
        row = run_case(case)
        rows.append(row)
        print(json.dumps(row), flush=True)
    table = []
    for row in rows:
        if row["low"] is None:
            table.append([row["case"], "no notice", f"{row['seconds']:.1f}", "", ""])
            continue
        middle = (row["low"] * row["high"]) ** 0.5
        holds = row["low"] <= row["seconds"] <= row["high"]
        table.append([row["case"], f"{row['low']:g} to {row['high']:g}", f"{row['seconds']:.1f}",
                      "yes" if holds else "**no**", f"{row['seconds'] / middle:.2f}"])
    print(format_table(["case", "notice (s)", "fit (s)", "in the range", "fit / middle"], table))
    write_json(args.out, {"environment": environment(), "rows": rows})


if __name__ == "__main__":
    sys.exit(main())
