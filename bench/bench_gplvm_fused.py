"""Is one fused sweep over K^-1's lower triangle (hyperparameter and latent gradients from one interpretation per tile) cheaper than two sweeps (the regression pass, then the latent pass)?

    python -m bench.bench_gplvm_fused                 # N = 1,000 and 2,000
    python -m bench.bench_gplvm_fused --n 4000 --repeats 7

The GPLVM's gradient pass (fastgp._engine.latent_passes.grad_latent_lower)
reads K^-1's lower triangle, A and X once, and interprets each tile of K once,
in the mode that carries both derivative blocks
(fastgp._engine.interpreter.eval_tile, D_THETA | D_X1): every leaf's
subexpressions serve the hyperparameter and the input derivatives. The
alternative (the two sweeps it replaces) reads the triangle twice and interprets every
tile twice: fastgp._engine.passes.grad_trace_lower for theta (D_THETA), then
the latent pass for X alone (D_X1). Both give the same numbers
(tests/_solvers/cholesky/test_gplvm_gradient.py). Timed in interleaved rounds
(bench/_measure.interleaved_medians) beside the fill on the same buffer, with
this data (Y standard normal (N, 12), Q = 2, C * RBF(2 length scales)
+ WhiteKernel).
"""

import argparse

import numpy as np
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from ._measure import interleaved_medians


def measure(n, repeats):
    from fastgp._solvers.cholesky.latent import LatentNegLogMarginalLikelihood
    from fastgp._linalg.lapack import cho_inverse_in_place
    from fastgp._solvers.workspace import Workspace

    rng = np.random.default_rng(0)
    Y = rng.standard_normal((n, 12))
    X = rng.standard_normal((n, 2))
    kernel = C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(1.0)
    objective = LatentNegLogMarginalLikelihood(kernel, Y, 2, 1e-10, Workspace(n))
    theta = kernel.theta
    B, A, _ = objective.factor(objective.pack(X, theta))
    cho_inverse_in_place(B)

    def gradient(fused):
        # the fused pass as a fit runs it; or the two sweeps it replaces
        if fused:
            objective.gradient(theta, B, A)
        else:
            objective.covariance.grad_latent(theta, B, A, with_theta=False)
            objective.covariance.grad_trace(theta, B, A)

    def fill():
        objective.covariance.fill_lower(theta, objective.nlml.diag_add, scratch)

    scratch = np.empty((n, n), order="F")
    times = interleaved_medians({"fused (one sweep)": lambda: gradient(True),
                                 "two sweeps": lambda: gradient(False),
                                 "fill": fill}, repeats=repeats, warmup=1)
    return {name: t["median_s"] for name, t in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[1000, 2000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    for n in args.n:
        t = measure(n, args.repeats)
        print(f"N = {n:6d}  " + "  ".join(f"{k} {v * 1e3:8.1f} ms" for k, v in t.items())
              + f"  (two / fused = {t['two sweeps'] / t['fused (one sweep)']:.2f})",
              flush=True)


if __name__ == "__main__":
    main()
