"""How long does fastgp's first call take in a fresh install (Numba compiles
its routines), and how long do import plus a first small fit take in a new
process once the compiled code is in Numba's cache (target: under 3 s)?

    python -m bench.bench_compile
    python -m bench.bench_compile --warm-runs 5 --gplvm

Each case is a new Python process with NUMBA_CACHE_DIR pointing at a
temporary folder: the first finds it empty (a fresh install: everything
compiles), the later ones find the cache it left. A last warm process fits a
different kernel (Matern * RationalQuadratic + White): fastgp interprets a
lowered kernel program, so a new kernel structure must not compile anything
new. Reported per process: interpreter start to the end, import of fastgp,
the first fit (N = 200, C*RBF + White from scikit-learn's defaults) and a
predict with std. With --gplvm a small GPLVM fit (N = 100) is added.

Writes bench/results/compile.json.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ._measure import REPO_ROOT, environment, write_json
from ._report import format_table

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import fastgp
from fastgp import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, Matern, RationalQuadratic, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
t1 = time.perf_counter()
rng = np.random.default_rng(0)
X = rng.standard_normal((200, 1)); y = np.sin(X[:, 0]) + 0.01 * rng.standard_normal(200)
kernel = (C() * RBF() + WhiteKernel() if sys.argv[1] == "rbf"
          else Matern(nu=1.5) * RationalQuadratic() + WhiteKernel())
gpr = GaussianProcessRegressor(kernel).fit(X, y)
t2 = time.perf_counter()
gpr.predict(X[:50], return_std=True)
t3 = time.perf_counter()
out = dict(import_s=t1 - t0, first_fit_s=t2 - t1, predict_s=t3 - t2)
if sys.argv[2] == "gplvm":
    from fastgp import GPLVM
    Y = rng.standard_normal((100, 12))
    GPLVM(n_components=2, max_iter=5).fit(Y)
    out["gplvm_fit_s"] = time.perf_counter() - t3
out["in_process_s"] = time.perf_counter() - t0
print(json.dumps(out))
"""


def _run(cache_dir, kernel, gplvm):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir))
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, kernel, "gplvm" if gplvm else "-"],
                          env=env, capture_output=True, text=True, cwd=REPO_ROOT,
                          timeout=1800)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"child failed:\n{proc.stderr[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process_wall_s"] = wall
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm-runs", type=int, default=3)
    parser.add_argument("--gplvm", action="store_true", help="add a small GPLVM fit")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench/results/compile.json")
    args = parser.parse_args(argv)

    cases = []
    with tempfile.TemporaryDirectory(prefix="fastgp-numba-cache-") as cache:
        cases.append(dict(case="cold (empty cache)", **_run(cache, "rbf", args.gplvm)))
        for i in range(args.warm_runs):
            cases.append(dict(case=f"warm {i + 1}", **_run(cache, "rbf", args.gplvm)))
        cases.append(dict(case="warm, other kernel", **_run(cache, "matern_rq", args.gplvm)))
    headers = ["process", "wall (s)", "import (s)", "first fit (s)", "predict (s)"]
    if args.gplvm:
        headers.append("GPLVM fit (s)")
    rows = []
    for c in cases:
        row = [c["case"], f"{c['process_wall_s']:.2f}", f"{c['import_s']:.2f}",
               f"{c['first_fit_s']:.2f}", f"{c['predict_s']:.2f}"]
        if args.gplvm:
            row.append(f"{c['gplvm_fit_s']:.2f}")
        rows.append(row)
    print(format_table(headers, rows))
    warm = sorted(c["process_wall_s"] for c in cases[1:-1])
    cold = cases[0]["process_wall_s"]
    summary = dict(cold_process_s=cold,
                   warm_process_median_s=warm[len(warm) // 2] if warm else None,
                   compile_s_estimate=cold - (warm[len(warm) // 2] if warm else 0.0))
    if warm:
        print(f"compilation in a fresh install: about {summary['compile_s_estimate']:.1f} s "
              f"(cold minus warm process); warm process (start, import, first fit, predict): "
              f"{summary['warm_process_median_s']:.2f} s, target < 3 s: "
              f"{'met' if summary['warm_process_median_s'] < 3 else 'NOT met'}")
    write_json(args.out, dict(question=__doc__.splitlines()[0], cases=cases, summary=summary,
                              environment=environment()))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
