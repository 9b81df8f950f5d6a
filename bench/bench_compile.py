"""How long does fastgp's first call take in a fresh install (Numba compiles
its routines), and how long do import plus a first small fit take in a new
process once the compiled code is in Numba's cache (target: under 3 s)?

    python -m bench.bench_compile
    python -m bench.bench_compile --warm-runs 5 --gplvm
    python -m bench.bench_compile --no-cache     # also: where no cache is writable
    python -m bench.bench_compile --compiles     # what the cold process compiled

Each case is a new Python process on a private copy of the package (a fresh
install) whose in-tree cache (``__pycache__`` beside its sources) starts
empty: the first process compiles everything and writes the cache, the later
ones load it. The last two warm processes fit a different kernel (Matern *
RationalQuadratic + White): fastgp interprets a lowered kernel program, so a
new kernel structure compiles nothing new, except a leaf family that no
earlier fit met (here the rational quadratic: the Matern kernels share the
RBF's): the first of the two compiles that family's entry once and caches it
(docs/design.md, "Numba's cache"), the second loads it. With --no-cache, further
processes run on another copy where no cache location is writable (a regular
file named ``__pycache__`` beside the engine's sources, NUMBA_CACHE_DIR,
XDG_CACHE_HOME and HOME below a regular file: a shared read-only install with
no writable home), so every one of them compiles in memory. Reported per
process: interpreter start to the end, import of fastgp, the first fit
(N = 200, C*RBF + White from scikit-learn's defaults) and a predict with std.
With --gplvm a small GPLVM fit (N = 100) is added.

Writes bench/results/compile.json.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ._measure import REPO_ROOT, environment, write_json
from ._report import format_table

CHILD = r"""
import json, sys, time, warnings
t0 = time.perf_counter()
import numpy as np
import fastgp
import numba.core.event
from fastgp import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, Matern, RationalQuadratic, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
t1 = time.perf_counter()
# every routine Numba compiles: its name, seconds (callees compiled for it
# included) and the routines whose compile it ran inside
compiles, open_compiles = [], []
class Recorder(numba.core.event.Listener):
    def on_start(self, ev):
        open_compiles.append((ev.data["dispatcher"].py_func.__qualname__, time.perf_counter()))
    def on_end(self, ev):
        name, start = open_compiles.pop()
        compiles.append(dict(name=name, seconds=time.perf_counter() - start,
                             inside=[n for n, _ in open_compiles]))
numba.core.event.register("numba:compile", Recorder())
rng = np.random.default_rng(0)
X = rng.standard_normal((200, 1)); y = np.sin(X[:, 0]) + 0.01 * rng.standard_normal(200)
kernel = (C() * RBF() + WhiteKernel() if sys.argv[1] == "rbf"
          else Matern(nu=1.5) * RationalQuadratic() + WhiteKernel())
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
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
out["fastgp"] = fastgp.__file__
out["compiles"] = compiles
out["cache_warnings"] = sum(w.category.__name__ == "NumbaCacheWarning" for w in seen)
print(json.dumps(out))
"""


def _fresh_install(root, writable_cache):
    """A copy of fastgp under ``root/site`` without any cache, and the
    environment of a process that uses it: its in-tree cache writable, or no
    cache location writable (by root either: each is blocked by a regular
    file in its way, which permissions cannot override)."""
    root = Path(root)
    site = root / "site"
    shutil.copytree(REPO_ROOT / "fastgp", site / "fastgp",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["PYTHONPATH"] = str(site)
    home = root
    if not writable_cache:
        home = root / "a-regular-file"
        home.write_text("no directory can be created below this file\n")
        (site / "fastgp" / "_engine" / "__pycache__").write_text("")
        env["NUMBA_CACHE_DIR"] = str(home / "numba-cache-dir")
    env["XDG_CACHE_HOME"] = str(home / "xdg-cache")  # the user-wide cache
    env["HOME"] = str(home / "home")
    return site, env


def _run(install, kernel, gplvm, writable_cache):
    site, env = install
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, kernel, "gplvm" if gplvm else "-"],
                          env=env, capture_output=True, text=True, cwd=site.parent,
                          timeout=1800)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"child failed:\n{proc.stderr[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if not Path(result["fastgp"]).is_relative_to(site):
        raise RuntimeError(f"the child imported {result['fastgp']}, not the copy in {site}")
    if result["cache_warnings"] != (0 if writable_cache else 1):
        raise RuntimeError(f"{result['cache_warnings']} NumbaCacheWarning(s) in a process "
                           f"whose cache is {'' if writable_cache else 'not '}writable")
    result["process_wall_s"] = wall
    return result


def _compile_table(compiles, at_least_s=0.2):
    """The cold process's compiles of at least ``at_least_s``, in the order
    they ended: a callee is compiled while its caller is typed, so it comes
    first, indented once more than its caller, and its seconds are included
    in the caller's."""
    lines = ["compiled in the cold process (seconds; callees indented, before their caller)"]
    lines += [f"{'  ' * len(c['inside'])}{c['name']:<{48 - 2 * len(c['inside'])}} "
              f"{c['seconds']:6.2f}" for c in compiles if c["seconds"] >= at_least_s]
    top = sum(c["seconds"] for c in compiles if not c["inside"])
    return "\n".join(lines + [f"all compiles (outermost ones summed): {top:.2f} s"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm-runs", type=int, default=3)
    parser.add_argument("--gplvm", action="store_true", help="add a small GPLVM fit")
    parser.add_argument("--no-cache", action="store_true",
                        help="also run processes where no cache location is writable")
    parser.add_argument("--no-cache-runs", type=int, default=2)
    parser.add_argument("--compiles", action="store_true",
                        help="list what the cold process compiled, routine by routine")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench/results/compile.json")
    args = parser.parse_args(argv)

    cases = []
    with tempfile.TemporaryDirectory(prefix="fastgp-compile-") as tmp:
        install = _fresh_install(Path(tmp) / "cached", writable_cache=True)
        run = lambda kernel: _run(install, kernel, args.gplvm, writable_cache=True)
        cases.append(dict(case="cold (empty cache)", **run("rbf")))
        for i in range(args.warm_runs):
            cases.append(dict(case=f"warm {i + 1}", **run("rbf")))
        cases.append(dict(case="warm, other kernel", **run("matern_rq")))
        cases.append(dict(case="warm, other kernel again", **run("matern_rq")))
        if args.no_cache:
            install = _fresh_install(Path(tmp) / "no-cache", writable_cache=False)
            for i in range(args.no_cache_runs):
                cases.append(dict(case=f"no writable cache {i + 1}",
                                  **_run(install, "rbf", args.gplvm, writable_cache=False)))
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
    if args.compiles:
        print(_compile_table(cases[0]["compiles"]))
    median = lambda values: sorted(values)[len(values) // 2] if values else None
    warm = [c["process_wall_s"] for c in cases if c["case"].startswith("warm ")]
    no_cache = [c["process_wall_s"] for c in cases if c["case"].startswith("no writable")]
    cold = cases[0]["process_wall_s"]
    cold_first_use = sum(cases[0][key] for key in ("import_s", "first_fit_s", "predict_s"))
    summary = dict(cold_process_s=cold, cold_first_use_s=cold_first_use,
                   warm_process_median_s=median(warm),
                   compile_s_estimate=cold - (median(warm) or 0.0),
                   no_cache_process_median_s=median(no_cache))
    if warm:
        print(f"compilation in a fresh install: about {summary['compile_s_estimate']:.1f} s "
              f"(cold minus warm process); warm process (start, import, first fit, predict): "
              f"{summary['warm_process_median_s']:.2f} s, target < 3 s: "
              f"{'met' if summary['warm_process_median_s'] < 3 else 'NOT met'}")
    print(f"cold first use (import + first fit + predict, empty cache): "
          f"{cold_first_use:.2f} s, target 12 s: {'met' if cold_first_use <= 12 else 'NOT met'}")
    if no_cache:
        print(f"no writable cache: every process takes {summary['no_cache_process_median_s']:.1f} s "
              f"(median), against {cold:.1f} s for the cold process that writes the in-tree "
              f"cache")
    write_json(args.out, dict(question=__doc__.splitlines()[0], cases=cases, summary=summary,
                              environment=environment()))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
