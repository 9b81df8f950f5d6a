"""The matrix-free solver's products on a two-worker dask cluster against Numba's threads in this process: time per product and bytes moved per CG iteration.

    python -m bench.bench_distributed --n 20000     # the figures of docs/benchmarks.md
    python -m bench.bench_distributed --n 2000 --repeats 1

Problem: bench/_problems.py's "1d" or "ard10" (``--problem``) at its start
theta. A CG iteration of the matrix-free fit multiplies K~ by a block of
t = T + n_probes columns (T = 1 target, ``--probes`` 16 by default, fewer as
columns converge); the gradient is one ``grad_bilinear`` pass over
t + T + k columns (k = ``--rank``, the preconditioner's rank, 100 by default).

Cases, each the median of ``--repeats`` calls after one untimed call:

- **in process**: ``FastCovariance.matmat`` on Numba's threads here (every
  core of this process's affinity mask);
- **cluster**: the same product through
  :class:`fastgp._solvers.iterative.distributed.WorkerProducts` under
  ``joblib.parallel_config(backend="dask")`` on a
  ``dask.distributed.LocalCluster(n_workers=--workers, threads_per_worker=1)``
  started here (the untimed call sends the training inputs and loads the
  compiled passes in the workers).

Bytes moved per CG iteration (one product), two ways: (1) the arrays in the
tasks' arguments and results (``WorkerProducts.traffic``: what a backend that
pickles every task's arguments moves); (2) what dask actually sent: the
bytes every process (this one, which holds the LocalCluster's scheduler and
the client, and each worker) wrote on dask's TCP connections during one
product (``distributed.comm.tcp.TCP.write`` wrapped to count them; each
message is written once, by its sender). The count includes the client
and scheduler's messages about the tasks. By default dask's client sends
scattered data and fetches results through the scheduler (each travels twice);
``--direct-to-workers`` measures ``Client(direct_to_workers=True)``.

    python -m bench.bench_distributed --n 20000 --direct-to-workers

The products are checked to give the in-process bits. On a machine with as
many cores as workers, the cluster case cannot be faster than the in-process
one (the same cores, plus the transfers): the figures measure the overhead
that the scaling model in docs/benchmarks.md ("Which solver when")
extrapolates from. Run it on an
otherwise quiet machine.

Writes bench/results/distributed.json.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from ._measure import REPO_ROOT, environment, write_json
from ._problems import make_problem
from ._report import format_table


def _count_writes():
    """Count the bytes this process writes on dask's TCP connections, from
    now on (wraps ``distributed.comm.tcp.TCP.write``, which returns them);
    idempotent. Every message between the client, scheduler and workers is
    written once by its sender, so the sum over processes is what moved."""
    from distributed.comm import tcp

    if getattr(tcp, "fastgp_written", None) is not None:
        return
    tcp.fastgp_written = 0
    write = tcp.TCP.write

    async def counted(self, msg, *args, **kwargs):
        n = await write(self, msg, *args, **kwargs)
        tcp.fastgp_written += n
        return n

    tcp.TCP.write = counted


def _bytes_written():
    from distributed.comm import tcp

    return tcp.fastgp_written


def _timed(fn, repeats):
    fn()  # untimed
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def _measure_cluster(products, theta, V, P, Q, repeats, n_workers, gradient, direct):
    """(times of matmat, times of grad_bilinear or None, bytes per product,
    result of matmat, result of grad_bilinear or None) on a LocalCluster."""
    import distributed
    import joblib

    from fastgp._solvers.iterative import distributed as dp

    with distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1,
                                  processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster, direct_to_workers=direct) as client, \
            joblib.parallel_config(backend="dask"):
        result = {}
        product_times = _timed(lambda: result.__setitem__("KV", products.matmat(theta, V)),
                               repeats)
        _count_writes()
        client.run(_count_writes)
        before = dict(products.traffic.__dict__)
        workers_before = client.run(_bytes_written)
        here_before = _bytes_written()
        products.matmat(theta, V)
        here_wrote = _bytes_written() - here_before
        workers_wrote = sum(v - workers_before[k] for k, v in client.run(_bytes_written).items())
        traffic = {k: v - before[k] for k, v in products.traffic.__dict__.items()}
        grad_times = None
        if gradient:
            grad_times = _timed(
                lambda: result.__setitem__("grad", products.grad_bilinear(theta, P, Q)),
                max(1, repeats // 2))
        counts = client.run(dp.worker_counts)
    per_product = dict(traffic, workers_wrote=workers_wrote, caller_wrote=here_wrote,
                       worker_counts=counts)
    return product_times, grad_times, per_product, result["KV"], result.get("grad")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--problem", default="1d", choices=["1d", "ard10"])
    parser.add_argument("--probes", type=int, default=16)
    parser.add_argument("--rank", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--direct-to-workers", dest="direct", action="store_true",
                        help="Client(direct_to_workers=True): the client sends V to and "
                             "fetches K V from the workers itself, not through the "
                             "scheduler")
    parser.add_argument("--no-gradient", dest="gradient", action="store_false",
                        help="skip the grad_bilinear pass (t + T + k columns)")
    parser.add_argument("--out", type=Path,
                        default=REPO_ROOT / "bench/results/distributed.json")
    args = parser.parse_args(argv)

    from fastgp._backend.covariance import make_covariance
    from fastgp._solvers.iterative.distributed import WorkerProducts

    problem = make_problem(args.problem, args.n)
    covariance = make_covariance(problem.kernel, problem.X)
    theta = problem.kernel.theta
    rng = np.random.default_rng(0)
    t = 1 + args.probes
    V = rng.standard_normal((problem.n, t))
    c = t + 1 + args.rank
    P, Q = rng.standard_normal((problem.n, c)), rng.standard_normal((problem.n, c))

    local = {}
    local_times = _timed(lambda: local.__setitem__("KV", covariance.matmat(theta, V)),
                         args.repeats)
    local_grad_times = None
    if args.gradient:
        local_grad_times = _timed(
            lambda: local.__setitem__("grad", covariance.grad_bilinear(theta, P, Q)),
            max(1, args.repeats // 2))

    products = WorkerProducts(covariance)
    cluster_times, cluster_grad_times, moved, KV, grad = _measure_cluster(
        products, theta, V, P, Q, args.repeats, args.workers, args.gradient,
        args.direct)
    same_bits = bool(np.array_equal(KV, local["KV"])
                     and (grad is None or np.array_equal(grad, local["grad"])))
    rel_gap = float(np.max(np.abs(KV - local["KV"])) / np.max(np.abs(local["KV"])))

    local_s = statistics.median(local_times)
    cluster_s = statistics.median(cluster_times)
    rows = [["K V, in process", f"{local_s:.3f}", "1.00", "-", "-"],
            ["K V, cluster", f"{cluster_s:.3f}", f"{cluster_s / local_s:.2f}",
             f"{moved['bytes_out'] + moved['bytes_back']:,}",
             f"{moved['workers_wrote'] + moved['caller_wrote']:,}"]]
    if args.gradient:
        lg, cg = statistics.median(local_grad_times), statistics.median(cluster_grad_times)
        rows += [["grad_bilinear, in process", f"{lg:.3f}", "1.00", "-", "-"],
                 ["grad_bilinear, cluster", f"{cg:.3f}", f"{cg / lg:.2f}", "-", "-"]]
    print(__doc__.splitlines()[0])
    print(f"N = {problem.n} ({args.problem}), t = {t} columns per CG product, "
          f"{c} in the gradient pass; {args.workers} dask workers (1 thread each"
          f"{', direct_to_workers' if args.direct else ''}); "
          f"{moved['tasks']} tasks per K V (groups of the symmetric product's "
          f"{covariance.pair_schedule()[0].size - 1} row blocks); "
          f"{args.repeats} timed call(s)")
    print(format_table(["case", "median (s)", "x in process",
                        "task arrays per CG iteration (B)", "sent on dask's TCP (B)"],
                       rows))
    print(f"per CG iteration: V is {V.nbytes:,} B, K V {KV.nbytes:,} B; "
          f"the workers sent {moved['workers_wrote']:,} B, this process "
          f"(client and scheduler) {moved['caller_wrote']:,} B; same bits as in process: "
          f"{'yes' if same_bits else 'NO'} (largest relative gap {rel_gap:.1e})")
    write_json(args.out, dict(
        environment=environment(), n=problem.n, problem=args.problem, t=t,
        gradient_columns=c, workers=args.workers, direct_to_workers=args.direct,
        block_rows=products.block_rows,
        repeats=args.repeats, local_s=local_times, cluster_s=cluster_times,
        local_grad_s=local_grad_times, cluster_grad_s=cluster_grad_times,
        per_cg_iteration=moved, V_bytes=V.nbytes, same_bits=same_bits,
        relative_gap=rel_gap))
    return 0


if __name__ == "__main__":
    sys.exit(main())
