"""How long does one fastgp loss+gradient take at N = 5,000 against SciPy's
own dpotrf + dpotri on the same matrix (target: at most 1.2x) and against
scikit-learn's log_marginal_likelihood(theta, eval_gradient=True) (target: at
least 3x faster), measured in the same run?

    python -m bench.bench_time_loss_grad               # N = 5,000
    python -m bench.bench_time_loss_grad --n 2000 --repeats 7 --sklearn-repeats 3

Problem: x standard normal (N, 1), y = sin(x) + 0.01 noise, C*RBF + White
at scikit-learn's default start (theta = 0). fastgp is timed as an optimiser
step calls it (one workspace reused). Phase 1 interleaves fastgp, dpotrf and
dpotrf + dpotri round by round (copying K into the work buffer is untimed);
phase 2 interleaves fastgp and scikit-learn, with fewer rounds since
scikit-learn is slower and needs about 12 x 8 N^2 bytes (2.4 GB at 5,000).
Medians after one warm-up call each; Numba's compilation happens before.

Writes bench/results/time_loss_grad.json.
"""

import argparse
import sys
from pathlib import Path

from ._measure import REPO_ROOT, environment, interleaved_medians, write_json
from ._problems import make_problem
from ._report import format_table
from .peers import Floor, get_adapter


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sklearn-repeats", type=int, default=2, help="0: no scikit-learn")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench/results/time_loss_grad.json")
    args = parser.parse_args(argv)

    fast = get_adapter("fastgp")()
    fast.warm_up("1d", args.n)
    problem = make_problem("1d", args.n)
    fast.prepare(problem)
    theta = problem.theta0
    floor = Floor(problem)
    phase1 = interleaved_medians(dict(fastgp=lambda: fast.loss_grad(theta), **floor.cases()),
                                 repeats=args.repeats, warmup=1)
    del floor
    phase2 = None
    if args.sklearn_repeats:
        sk = get_adapter("sklearn")()
        sk.prepare(problem)
        phase2 = interleaved_medians(dict(fastgp=lambda: fast.loss_grad(theta),
                                          sklearn=lambda: sk.loss_grad(theta)),
                                     repeats=args.sklearn_repeats, warmup=1)

    t_fast = phase1["fastgp"]["median_s"]
    t_floor = phase1["floor-potrf-potri"]["median_s"]
    rows = [["fastgp loss+gradient", f"{t_fast:.4f}", "1", ""],
            ["dpotrf", f"{phase1['floor-potrf']['median_s']:.4f}",
             f"{phase1['floor-potrf']['median_s'] / t_fast:.3f}", ""],
            ["dpotrf + dpotri (floor)", f"{t_floor:.4f}", f"{t_floor / t_fast:.3f}",
             f"fastgp / floor = {t_fast / t_floor:.3f} (target <= 1.2: "
             f"{'met' if t_fast / t_floor <= 1.2 else 'NOT met'})"]]
    ratios = {"fastgp_over_floor": t_fast / t_floor}
    if phase2:
        r = phase2["sklearn"]["median_s"] / phase2["fastgp"]["median_s"]
        ratios["sklearn_over_fastgp"] = r
        rows.append(["scikit-learn loss+gradient", f"{phase2['sklearn']['median_s']:.4f}",
                     f"{r:.3f}", f"sklearn / fastgp = {r:.2f} (target >= 3: "
                     f"{'met' if r >= 3 else 'NOT met'}; fastgp {phase2['fastgp']['median_s']:.4f} s "
                     "in these rounds)"])
    print(f"N = {args.n:,}, medians of {args.repeats} interleaved rounds "
          f"(scikit-learn: {args.sklearn_repeats})")
    print(format_table(["case", "median (s)", "/ fastgp", "ratio"], rows))
    write_json(args.out, dict(question=__doc__.splitlines()[0], n=args.n, phase1=phase1,
                              phase2=phase2, ratios=ratios, environment=environment()))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
