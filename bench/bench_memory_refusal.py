"""How long does fastgp take to refuse an operation that will not fit in
memory? (docs/reliability.md: a refusal comes before any N x N allocation or
kernel pass, so it should take well under a second.)

    python -m bench.bench_memory_refusal
    python -m bench.bench_memory_refusal --repeats 5

Times, in this process, the refusal of: a regressor fit at N = 200,000 (or
more where 8 N^2 bytes would fit), ``predict(return_cov=True)`` and
``sample_y`` on that many query points, and a GPLVM fit at that N. Each case
is run ``--repeats`` times; the median and the largest are reported. The tests
(tests/memory/test_reliability_memory.py) check what happens before the refusal
(no kernel pass, no large allocation), not its time.

Writes bench/results/memory_refusal.json.
"""

import argparse
import math
import statistics
import time

import numpy as np
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import GPLVM, GaussianProcessRegressor, memory

from ._measure import REPO_ROOT, environment, write_json
from ._report import format_table


def _huge_n():
    reading = memory.available_memory()
    if reading is None:
        return 200_000
    return max(200_000, 2 * math.isqrt(reading.available // 8 + 1))


def _cases(n):
    kernel = C(1.0) * RBF(1.0) + WhiteKernel(0.1)
    X = np.linspace(0.0, 1.0, n).reshape(-1, 1)
    rng = np.random.default_rng(0)
    X_small = rng.uniform(0, 5, size=(20, 1))
    small = GaussianProcessRegressor(kernel, optimizer=None).fit(X_small, np.sin(X_small[:, 0]))
    Y = rng.standard_normal((n, 3))
    return {
        "fit": lambda: GaussianProcessRegressor(kernel).fit(X, np.zeros(n)),
        "predict(return_cov)": lambda: small.predict(X, return_cov=True),
        "sample_y": lambda: small.sample_y(X, 3),
        "GPLVM.fit": lambda: GPLVM(n_components=2, random_state=0).fit(Y),
    }


def _time_refusal(call, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        try:
            call()
        except MemoryError:
            times.append(time.perf_counter() - start)
        else:
            raise RuntimeError("the operation was not refused")
    return times


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=REPO_ROOT / "bench/results/memory_refusal.json")
    args = parser.parse_args(argv)
    n = _huge_n()
    rows, results = [], {}
    for name, call in _cases(n).items():
        times = _time_refusal(call, args.repeats)
        results[name] = {"median_s": statistics.median(times), "max_s": max(times)}
        rows.append([name, f"{statistics.median(times):.3f}", f"{max(times):.3f}"])
    print(f"N = {n:,}")
    print(format_table(["refused operation", "median s", "max s"], rows))
    write_json(args.out, {"environment": environment(), "n": n,
                          "repeats": args.repeats, "results": results})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
