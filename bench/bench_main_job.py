"""Does the main job (``python -m fastgp``: the Mauna Loa CO2 fit) give the
same bits quiet and beside a competing process?

    python -m bench.bench_main_job                 # five runs, the 2nd and 4th busy
    python -m bench.bench_main_job --runs 3 --busy 2 --n-samples 500

Each run is a fresh process that fits the main job's model to the main
job's data, as ``python -m fastgp`` does (fastgp.cli: the kernel of
``weekly_co2_kernel()``, L-BFGS-B, y centred), and prints the log marginal
likelihood, the fitted theta (as exact hex floats), the iteration and
evaluation counts and the fit's wall time. The busy runs start beside the
competitor of bench/bench_busy_machine.py (a 2-thread OpenBLAS loop of
dgemm, dpotrf and dpotri), under which fastgp's thread policy lowers its
thread counts for some evaluations. The question is whether every run gives
the first run's numbers bit for bit (docs/reliability.md, "Persistence and
determinism"). Run it on an otherwise quiet machine. Writes
bench/results/main_job.json.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

from ._measure import REPO_ROOT, environment, write_json
from ._report import format_table
from .bench_busy_machine import start_competitor

#: One run: the main job's fit, its numbers printed as one JSON line.
FIT = r"""
import json, sys, time, warnings
from fastgp import GaussianProcessRegressor
from fastgp.cli import weekly_co2_kernel
from fastgp.datasets import load_mauna_loa_co2

n = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] != "all" else None
X, y = load_mauna_loa_co2()
if n is not None:
    X, y = X[:n], y[:n]
warnings.simplefilter("ignore")
start = time.perf_counter()
gpr = GaussianProcessRegressor(weekly_co2_kernel()).fit(X, y - y.mean())
print(json.dumps({"lml": float(gpr.log_marginal_likelihood_value_).hex(),
                  "lml_value": float(gpr.log_marginal_likelihood_value_),
                  "theta": [float(t).hex() for t in gpr.kernel_.theta],
                  "n_iter": int(gpr.n_iter_), "n_evaluations": int(gpr.n_evaluations_),
                  "fit_s": time.perf_counter() - start}))
"""

#: What must agree between runs (the wall time need not).
COMPARED = ("lml", "theta", "n_iter", "n_evaluations")


def run_once(n_samples, busy, competitor_size):
    """One fresh process's numbers; beside the competitor where ``busy``."""
    competitor = start_competitor(competitor_size) if busy else None
    try:
        proc = subprocess.run([sys.executable, "-c", FIT, str(n_samples or "all")],
                              capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    finally:
        if competitor is not None:
            competitor.kill()
            competitor.wait()
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]), busy=busy)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--busy", default="2,4",
                        help="the runs (1-based, comma-separated) beside the competitor")
    parser.add_argument("--n-samples", type=int, default=None,
                        help="the first N weeks only (default: the whole series)")
    parser.add_argument("--competitor-size", type=int, default=1_000)
    parser.add_argument("--out", type=Path,
                        default=REPO_ROOT / "bench" / "results" / "main_job.json")
    args = parser.parse_args(argv)
    busy = {int(i) for i in args.busy.split(",") if i.strip()}
    if args.runs < 1 or not busy <= set(range(1, args.runs + 1)):
        parser.error(f"--busy must name runs between 1 and --runs = {args.runs}")
    runs = []
    for i in range(1, args.runs + 1):
        runs.append(run_once(args.n_samples, i in busy, args.competitor_size))
        r = runs[-1]
        print(f"run {i} ({'busy' if r['busy'] else 'quiet'}): lml {r['lml_value']:.10f}, "
              f"{r['n_iter']} iterations, {r['n_evaluations']} evaluations, "
              f"fit {r['fit_s']:.1f} s", flush=True)
    same = all(all(r[k] == runs[0][k] for k in COMPARED) for r in runs)
    print()
    print(format_table(["run", "machine", "log marginal likelihood", "iterations",
                        "evaluations", "fit (s)", "same bits as run 1"],
                       [[str(i), "busy" if r["busy"] else "quiet", f"{r['lml_value']:.10f}",
                         str(r["n_iter"]), str(r["n_evaluations"]), f"{r['fit_s']:.1f}",
                         "yes" if all(r[k] == runs[0][k] for k in COMPARED) else "NO"]
                        for i, r in enumerate(runs, 1)]))
    print(f"every run the same bits: {'yes' if same else 'NO'}")
    write_json(args.out, dict(environment=environment(), n_samples=args.n_samples,
                              runs=runs, same_bits=same))
    print(f"wrote {args.out}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
