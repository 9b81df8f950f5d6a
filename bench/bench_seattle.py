"""Does a full fit on the Seattle hourly temperature series (N = 8,759) run
on this machine, and what are its time, peak memory and final log marginal
likelihood, beside scikit-learn's on the same data, kernel and start?

    python -m bench.bench_seattle                  # fastgp only
    python -m bench.bench_seattle --sklearn        # also scikit-learn (~6 GB+, slow)
    python -m bench.bench_seattle --n 1000 --sklearn   # a small check

Data: fastgp.datasets.load_seattle_temperatures(), time in hours since the
first sample, temperature minus its mean. Kernel: C * Matern(nu=1.5) +
WhiteKernel, started at C = 100 (deg F)^2 (the series' variance), length scale
24 h (the daily cycle) and noise 1 (deg F)^2, with bounds wide enough that the
optimum is inside them (bench/_problems.py, seattle_kernel, says why). Both
libraries use scikit-learn's L-BFGS-B driver and tolerances from that start.
Each fit runs in its own process; peak memory is above the process's memory
before the data is built. scikit-learn needs several N x N x n_theta arrays
(about 12 x 8 N^2 = 7 GB at 8,759); its process is killed if it grows past
90 % of the free memory, and that is reported.

Writes bench/results/seattle.json.
"""

import argparse
import sys
from pathlib import Path

import numpy as np

from ._measure import (REPO_ROOT, available_memory_bytes, environment,
                       run_in_subprocess, write_json)
from ._problems import seattle_kernel
from ._report import format_table


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8759, help="first N hours (default: all)")
    parser.add_argument("--sklearn", action="store_true", help="also fit with scikit-learn")
    parser.add_argument("--timeout", type=float, default=4 * 3600)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench/results/seattle.json")
    args = parser.parse_args(argv)

    libraries = ["fastgp"] + (["sklearn"] if args.sklearn else [])
    cases = []
    for library in libraries:
        spec = dict(library=library, problem="seattle", n=args.n, kind="fit")
        guard = 0.9 * (available_memory_bytes() or 0) or None
        result = run_in_subprocess("bench._worker", spec, timeout_s=args.timeout,
                                   memory_limit_bytes=guard)
        cases.append(dict(spec, **result))

    rows = []
    for c in cases:
        if c["status"] != "ok":
            rows.append([c["library"], "-", "-", "-", "-", "-", f"{c['status']}: {c.get('reason')}"])
            continue
        f, m = c["fit"], c["memory"]
        kernel = seattle_kernel().clone_with_theta(np.asarray(f["theta"]))
        rows.append([c["library"], f"{f['wall_s']:.1f}", f"{m['delta_mb']:.0f}",
                     f"{m['multiple_of_8n2']:.2f}", f"{-f['final_nlml']:.3f}",
                     f"{f['n_evaluations']} / {f['n_iterations']}", str(kernel)])
    print(f"Seattle hourly temperature 2010, N = {args.n:,}")
    print(format_table(["library", "fit (s)", "peak (MB)", "x 8N^2", "log marginal likelihood",
                        "evaluations / iterations", "fitted kernel"], rows))
    write_json(args.out, dict(question=__doc__.splitlines()[0], n=args.n,
                              start_kernel=str(seattle_kernel()), cases=cases,
                              environment=environment()))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
