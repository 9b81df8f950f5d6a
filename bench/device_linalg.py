"""What do the GPU's factor and inverse of the one buffer cost, against
cuSOLVER's own routines, and are they right at sizes CI never runs?

    python -m bench.device_linalg --sizes 20000,40000 --blocks 1024,2048
    python -m bench.device_linalg --sizes 50000 --blocks 1024 --syrk-orders block,whole \\
        --out bench/results/device_linalg.json

Needs a CUDA GPU with CuPy and nvmath-python (not run in CI). For each N one
CuPy buffer (8 N^2 bytes) holds K: bench/bench_large_n.py's RBF on sorted
uniform inputs on [0, 10] plus 1e-2 on the diagonal, written column block by
column block into the lower triangle, with NaN in the strict upper triangle
(which no routine may read), and no N x N temporary. After one untimed
warm-up each, timed with CUDA events (and the wall clock around a
synchronisation), in place:

- ``potrf``: cuSOLVER's dpotrf on the whole buffer
  (:func:`fastgp._linalg.device_blocked.cholesky_in_place`, method "whole");
- ``xpotrf``: cuSOLVER's 64-bit-API Cholesky on the whole buffer;
- ``blocked factor``: the blocked right-looking factor, per block (and
  ``syrk_order``);
- ``potri``: cuSOLVER's dpotri on the factor (only N < 46,341, where it
  works);
- ``blocked inverse``: :func:`fastgp._linalg.device_blocked.cho_inverse_in_place`
  on the factor, per block (and ``syrk_order``).

Each result is checked on a few hundred sampled rows against K recomputed
from the inputs: max |L L^T - K| / max |K| on the sampled rows and columns
for a factor; max |(K^-1 K)_IJ - I_IJ| over every column of K^-1's sampled
rows for an inverse; and the strict upper triangle still NaN. Reported:
seconds, TFLOP/s (N^3 / 3 for a factor, 2 N^3 / 3 for an inverse) and CuPy's
pool (bytes held, peak over the measurement, beside the buffer's 8 N^2).
Every measurement runs in its own try/except: an error is recorded and the
rest go on. Prints the JSON; ``--out`` also writes it, after every
measurement, so that a run cut short keeps what it measured.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

#: Order from which cuSOLVER's dpotri answers INVALID_VALUE (N^2 >= 2^31).
POTRI_BELOW = 46341

#: ``--syrk-orders`` words: "block" is the default (dsyrk on blocks of the
#: block's order, the rest in dgemms), "whole" one dsyrk per update.
SYRK_ORDERS = {"block": None, "whole": 2**31 - 1}


def fill_kernel(cp, B, x, noise=1e-2, length_scale=1.0, columns=256):
    """Write K's lower triangle (RBF of the sorted inputs ``x`` plus
    ``noise`` on the diagonal) into the CuPy buffer ``B`` (n, n), NaN above
    the diagonal, by column blocks, in place."""
    n = B.shape[0]
    scale = -0.5 / length_scale**2
    for j0 in range(0, n, columns):
        j1 = min(n, j0 + columns)
        below = B[j0:, j0:j1]
        cp.subtract(x[j0:, None], x[None, j0:j1], out=below)
        cp.square(below, out=below)
        below *= scale
        cp.exp(below, out=below)
        B[:j0, j0:j1] = cp.nan
        r = cp.arange(j1 - j0)
        diagonal_block = B[j0:j1, j0:j1]
        diagonal_block[...] = cp.where(r[:, None] < r[None, :], cp.nan, diagonal_block)
    i = cp.arange(n)
    B[i, i] += noise


def kernel_columns(cp, x, columns, noise=1e-2, length_scale=1.0):
    """K[:, columns] (n, len(columns)) recomputed from the inputs."""
    K = cp.exp(-0.5 * ((x[:, None] - x[None, columns]) / length_scale) ** 2)
    K[columns, cp.arange(len(columns))] += noise
    return K


def _upper_is_nan(cp, B, rows):
    """Whether the strict upper triangle of B's sampled ``rows`` is NaN."""
    n = B.shape[0]
    upper = cp.arange(n)[None, :] > rows[:, None]
    return bool(cp.all(cp.isnan(B[rows, :][upper])))


def factor_error(cp, B, x, rows):
    """max |L L^T - K| over the sampled rows and columns, / max |K|."""
    n = B.shape[0]
    lower = cp.arange(n)[None, :] <= rows[:, None]
    L_rows = cp.where(lower, B[rows, :], 0.0)
    K = kernel_columns(cp, x, rows)[rows, :]
    return float(cp.abs(L_rows @ L_rows.T - K).max() / cp.abs(K).max())


def inverse_error(cp, B, x, rows):
    """max |(K^-1 K)[rows, rows] - I|, with the sampled rows of K^-1 read
    whole from its lower triangle (B[i, j] for j <= i, B[j, i] above)."""
    n = B.shape[0]
    lower = cp.arange(n)[None, :] <= rows[:, None]
    R = cp.where(lower, B[rows, :], B[:, rows].T)
    E = R @ kernel_columns(cp, x, rows)
    return float(cp.abs(E - cp.eye(len(rows))).max())


def _timed(cp, run):
    """(CUDA-event seconds, wall seconds) of ``run()``."""
    cp.cuda.get_current_stream().synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    wall = time.perf_counter()
    start.record()
    run()
    end.record()
    end.synchronize()
    return cp.cuda.get_elapsed_time(start, end) / 1e3, time.perf_counter() - wall


def _one(cp, pool, tiles, B, x, rows, case, repeats, warmups):
    """One measurement of ``case`` (name, prepare, run, check, flops):
    ``prepare()`` (untimed) before every ``run()``, ``warmups`` untimed
    runs, then ``repeats`` timed; the last result checked by ``check``.
    The pool's blocks are freed first, so that its growth is what the runs
    allocated. Errors are recorded, not raised."""
    name, prepare, run, check, flops = case
    row = {"name": name, "n": int(B.shape[0])}
    try:
        pool.free_all_blocks()
        before = pool.total_bytes()
        peak = before
        seconds, wall = [], []
        for timed in [False] * warmups + [True] * repeats:
            prepare()
            if timed:
                event_s, wall_s = _timed(cp, run)
                seconds.append(event_s)
                wall.append(wall_s)
            else:
                run()
            peak = max(peak, pool.total_bytes())
        row.update(seconds=seconds, wall_seconds=wall, tflops=flops / min(seconds) / 1e12,
                   pool_total_bytes=peak, pool_growth_bytes=peak - before,
                   buffer_bytes=int(B.nbytes),
                   cusolver_workspace_bytes=getattr(tiles, "workspace_bytes", 0))
        row.update(check())
        row["upper_still_nan"] = _upper_is_nan(cp, B, rows)
    except Exception as exc:  # noqa: BLE001 - one failure must not lose the rest
        row["error"] = f"{type(exc).__name__}: {exc}"
    return row


def measure(n_values, blocks, syrk_orders=(None,), repeats=1, warmups=1, samples=256,
            seed=0, out=None, report=print, cp=None, make_tiles=None):
    """Time and check the device's factor and inverse (the module's
    docstring) at every N in ``n_values`` with every block in ``blocks``
    and ``syrk_order`` in ``syrk_orders``; returns {"environment", "rows"}.
    ``out``: a path the JSON is written to after every measurement;
    ``report``: called with each row as it is measured. ``cp`` (the array
    module, ``cupy`` by default) and ``make_tiles`` (a new tile-calls
    object, :class:`fastgp._linalg.cuda_tiles.CudaTiles` by default) are
    for trying the script's logic without a GPU. Each measurement gets its
    own tiles, so that the cuSOLVER workspace it reports is its own."""
    from fastgp._linalg import device_blocked

    if cp is None:
        import cupy as cp
    if make_tiles is None:
        from fastgp._linalg.cuda_tiles import CudaTiles as make_tiles

    result = {"environment": _environment(cp), "rows": []}
    pool = cp.get_default_memory_pool()

    def add(row):
        result["rows"].append(row)
        report(json.dumps(row))
        if out is not None:
            Path(out).write_text(json.dumps(result, indent=1))

    for n in n_values:
        n = int(n)
        rng = np.random.default_rng(seed)
        x = cp.asarray(np.sort(rng.uniform(0.0, 10.0, n)))
        rows = cp.asarray(np.sort(rng.choice(n, size=min(samples, n), replace=False)))
        pool.free_all_blocks()
        try:
            B = cp.empty((n, n), dtype=cp.float64, order="F")
        except Exception as exc:  # noqa: BLE001
            add({"name": "allocate", "n": n, "error": f"{type(exc).__name__}: {exc}"})
            continue
        for case in _cases(cp, device_blocked, B, x, rows, blocks, syrk_orders):
            tiles = make_tiles()
            try:
                add(_one(cp, pool, tiles, B, x, rows, case(tiles), repeats, warmups))
            finally:
                if hasattr(tiles, "close"):
                    tiles.close()
        del B
        pool.free_all_blocks()
    return result


def _cases(cp, device_blocked, B, x, rows, blocks, syrk_orders):
    """The measurements at B's order, each a function of the tiles giving
    (name, prepare, run, check, flops)."""
    n = B.shape[0]
    factor_flops, inverse_flops = n**3 / 3, 2 * n**3 / 3

    def refill(tiles):
        fill_kernel(cp, B, x)

    def refill_and_factor(tiles):
        refill(tiles)
        device_blocked.cholesky_in_place(tiles, B, "whole")

    def check_factor():
        return {"factor_error": factor_error(cp, B, x, rows)}

    def check_inverse():
        return {"inverse_error": inverse_error(cp, B, x, rows)}

    def whole(routine):
        def run(tiles):
            info = tiles.info_vector(1)
            getattr(tiles, routine)(B, info, 0)
            code = int(tiles.to_host(info)[0])
            if code != 0:
                raise RuntimeError(f"{routine}: info {code}")
        return run

    def case(name, prepare, run, check, flops):
        return lambda tiles: (name, lambda: prepare(tiles), lambda: run(tiles), check, flops)

    def label(block, order):
        return f"block {block}" + ("" if order is None else f", syrk {order}")

    cases = [case("potrf", refill, whole("potrf"), check_factor, factor_flops),
             case("xpotrf", refill, whole("xpotrf"), check_factor, factor_flops)]
    for block in blocks:
        for order in syrk_orders:
            cases.append(case(f"blocked factor, {label(block, order)}", refill,
                              lambda tiles, b=block, o=order: device_blocked.cholesky_in_place(
                                  tiles, B, "blocked", b, o), check_factor, factor_flops))
    if n < POTRI_BELOW:
        cases.append(case("potri", refill_and_factor, whole("potri"), check_inverse,
                          inverse_flops))
    for block in blocks:
        for order in syrk_orders:
            cases.append(case(f"blocked inverse, {label(block, order)}", refill_and_factor,
                              lambda tiles, b=block, o=order: device_blocked.cho_inverse_in_place(
                                  tiles, B, b, o), check_inverse, inverse_flops))
    return cases


def _environment(cp):
    env = {"python": sys.version.split()[0], "cupy": cp.__version__}
    try:
        import nvmath
        env["nvmath"] = nvmath.__version__
        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        env["device"] = props["name"].decode() if isinstance(props["name"], bytes) \
            else str(props["name"])
        env["cuda_runtime"] = cp.cuda.runtime.runtimeGetVersion()
    except Exception as exc:  # noqa: BLE001 - the figures still count without these
        env["environment_error"] = repr(exc)
    return env


def _ints(text):
    return [int(v) for v in text.split(",") if v]


def _syrk_orders(text):
    return [SYRK_ORDERS[v] if v in SYRK_ORDERS else int(v) for v in text.split(",") if v]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.device_linalg",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=_ints, default=[20000, 40000])
    parser.add_argument("--blocks", type=_ints, default=[1024, 2048])
    parser.add_argument("--syrk-orders", type=_syrk_orders, default=[None],
                        help="comma list: 'block' (dsyrk of the block's order), "
                             "'whole' (one dsyrk per update) or an order")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--warmups", type=int, default=1)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    result = measure(args.sizes, args.blocks, args.syrk_orders, args.repeats, args.warmups,
                     args.samples, out=args.out, report=lambda row: print(row, flush=True))
    print(json.dumps(result, indent=1))
    errors = [row for row in result["rows"] if "error" in row]
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
