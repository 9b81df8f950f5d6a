"""How does fastgp's GPLVM compare with GPy's at N = 1,000 and 2,000: time per objective+gradient, peak memory, and the objective after the same iterations from the same start?

    python -m bench.bench_gplvm_gpy                      # N = 1,000 and 2,000, 50 iterations
    python -m bench.bench_gplvm_gpy --n 500 --iterations 10   # a quick check

Both libraries get the GPLVM issue's data (Y standard normal (N, 12), centred),
Q = 2 latent dimensions started at the same PCA points, the same kernel
(a variance times an ARD RBF plus Gaussian noise, all started at 1.0:
scikit-learn's ``C(1) * RBF([1, 1]) + WhiteKernel(1)``, GPy's
``RBF(2, ARD=True)`` with its Gaussian likelihood) and the same optimiser:
SciPy's L-BFGS-B over z = [X.ravel(), log-parameters] within the kernel's
bounds (bench/peers/_base.LBFGSBCounter), capped at the same number of
iterations. Only the cost of an evaluation differs, and the final objectives
show whether the paths agree.

Each case runs in a fresh process (bench/_worker.py): the library's import and
compilation first, then the peak resident memory above the baseline is
measured around building the data and the first objective+gradient
("loss_grad") or the whole fit ("fit"). Time per objective+gradient is the
median of ``--repeats`` calls at the start. Results go to
bench/results/gplvm_gpy.json with versions, threads and git revision.
"""

import argparse

from ._measure import REPO_ROOT, environment, run_in_subprocess, write_json

LIBRARIES = ("fastgp-gplvm", "gpy-gplvm")


def run(n_values, iterations, repeats, timeout_s):
    rows = []
    for n in n_values:
        for library in LIBRARIES:
            grad = run_in_subprocess("bench._worker", dict(
                library=library, problem="gplvm", n=n, kind="loss_grad",
                repeats=repeats), timeout_s=timeout_s)
            fit = run_in_subprocess("bench._worker", dict(
                library=library, problem="gplvm", n=n, kind="fit",
                max_iter=iterations), timeout_s=timeout_s)
            row = {"library": library, "n": n, "loss_grad": grad, "fit": fit}
            rows.append(row)
            print(_line(row), flush=True)
    return rows


def _line(row):
    g, f = row["loss_grad"], row["fit"]
    head = f"N = {row['n']:5d}  {row['library']:13s}"
    if g.get("status") != "ok":
        return f"{head}  loss_grad {g.get('status')}: {g.get('reason')}"
    t = g["time"]["loss_grad"]["median_s"]
    text = (f"{head}  objective+gradient {t:8.3f} s  start value {g['value']:.8g}  "
            f"peak (first call) {g['memory']['delta_mb']:7.1f} MB "
            f"({g['memory']['multiple_of_8n2']:.2f} x 8N^2)")
    if f.get("status") != "ok":
        return f"{text}\n{'':21s}fit {f.get('status')}: {f.get('reason')}"
    fit = f["fit"]
    return (f"{text}\n{'':21s}fit: {fit['n_iterations']} iterations, "
            f"{fit['n_evaluations']} evaluations, {fit['wall_s']:.1f} s, final "
            f"-log p(Y|X) {fit['final_nlml']:.8g}, peak {f['memory']['delta_mb']:.1f} MB "
            f"({f['memory']['multiple_of_8n2']:.2f} x 8N^2)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[1000, 2000])
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--out", default=str(REPO_ROOT / "bench" / "results"
                                             / "gplvm_gpy.json"))
    args = parser.parse_args(argv)
    rows = run(args.n, args.iterations, args.repeats, args.timeout)
    write_json(args.out, {"question": __doc__.splitlines()[0],
                          "iterations": args.iterations, "repeats": args.repeats,
                          "rows": rows, "environment": environment()})
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
