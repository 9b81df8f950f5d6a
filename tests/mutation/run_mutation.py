"""Mutation testing of every module of fastgp with cosmic-ray (docs/testing.md).

    python tests/mutation/run_mutation.py all --per-module 3 --budget-s 1800
    python tests/mutation/run_mutation.py python --modules fastgp/_backend/lowering.py --list
    python tests/mutation/run_mutation.py python --modules fastgp/_fit/clock.py \
        --per-module 12 --every-below 12
    python tests/mutation/run_mutation.py all --table

Two groups, because Numba makes a mutant of the engine expensive: any change
to a module of compiled code in ``fastgp/_engine`` changes the package-wide
cache stamp (``config.STAMPED_MODULES``), so every routine recompiles
(40-60 s a mutant). ``all`` runs both in turn under one budget.

- ``python``: every module outside the engine, and the two engine modules
  outside the stamp (``threads.py``, ``compile_time.py``). The engine is
  unchanged, so its compiled code comes from Numba's cache; each mutant runs
  a targeted test selection (seconds).
- ``engine``: the stamped modules (interpreter, leaves, passes, ...), run as
  plain Python (``NUMBA_DISABLE_JIT=1`` with the ``mutation.pure_python``
  plugin) on a selection of small-N tests each.

Modules in which it finds nothing (the deprecation shims,
``exceptions.py``, ``memory/__init__.py``, ``__main__.py``) are listed with 0
mutants.

For each module, cosmic-ray (``cosmic-ray init``) lists every mutant; every
one runs where the module has at most ``--every-below``, else a random sample
of ``--per-module`` of them (``random.Random(SEED)`` over the
mutants sorted by operator, occurrence and position, so the sample is the
same on every run of the same sources) is kept and the rest deleted from the
session before ``cosmic-ray exec`` runs it. Everything happens in a copy of
the source tree in a temporary folder (cosmic-ray mutates files in place).
Each test selection first runs on the unmutated copy and must pass (else
every mutant would count as killed; a selection that fails or takes longer
than ``--baseline-max-s`` is reported and its modules' mutants are not run);
a mutant's timeout is at least 4x that run. A module's mutants get at most
twice its fair share of the budget left; mutants not run by then are
reported as not run. A mutant whose tests time out counts as killed
(cosmic-ray's rule).

Writes tests/mutation/results/run.json (or ``--output``) after each module
(a stopped run keeps what finished): per module, the number of mutants, the
sample, killed, survived, not run, the kill rate's 95 % Wilson interval (a
sample is a simple random sample of the module's mutants, so the interval is
the module's kill rate's, not the sample's), and each survivor's diff.
``--table`` prints a results file as docs/testing.md's table.

Left out of every run: :data:`NOT_MUTATED` (imports, re-exports or a
docstring only). tests/project/test_mutation_runner.py checks that every
other module of fastgp/ has a test selection here.
"""

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results"

#: Seed of the mutant sample.
SEED = 20261130

_PYTEST = "python -m pytest -x -q -p no:cacheprovider -p no:randomly"

#: test selections shared by several modules (one unmutated run each)
_LOWERING = "tests/_backend/test_lowering.py tests/kernels/test_kernels_fastpath.py"
_FIT = "tests/_fit/test_fitting.py tests/estimators/test_reliability_pd.py"
_CLI = "tests/cli/test_cli.py"
_CLASSIFIER = "tests/estimators/test_classifier.py tests/_solvers/cholesky/test_laplace_float32.py"
_ITERATIVE = "tests/_solvers/iterative/test_iterative_krylov.py tests/_solvers/iterative/test_iterative_objective.py"
_VECCHIA = "tests/_solvers/vecchia/test_vecchia_core.py tests/estimators/test_vecchia_regressor.py"
_FITTED = "tests/estimators/test_fitted_state.py"
_MEMORY = ("tests/memory/test_reliability_memory.py tests/memory/test_reliability_budget.py "
           "tests/memory/test_reliability_ledger.py")
_SHIMS = "tests/project/test_public_names.py"
_BACKEND = "tests/_backend/test_backend_conformance.py tests/_backend/test_kernel_fallback.py"
#: the GPU path's tests in numba-cuda's simulator (tests/conftest.py sets
#: NUMBA_ENABLE_CUDASIM) without the whole fits marked slow
_GPU = "tests/_solvers/cuda/test_gpu_path.py -m 'not slow'"
_DEVICE_LINALG = "tests/_linalg/test_linalg_device_blocked.py"
#: the battery's memory estimates against traced peaks, for every solver
_MEMORY_PEAKS = "tests/_solvers/test_solver_conformance.py -k memory"
#: the engine's selections run as plain Python; the tests that need the JIT
#: itself (a compile-time refusal, thread counts, a float's last bits) are left out
_PURE = "-p mutation.pure_python "
_ENGINE_CORE = (_PURE + "tests/_engine/test_engine_interpreter.py tests/_engine/test_engine_address_call.py "
                "-k 'not caller_compiles'")
_PASSES = _PURE + "tests/_engine/test_covariance_passes.py -k 65"
#: Vecchia's engine modules: the packed tiles' predictions, and the column
#: tiles' likelihood
_VECCHIA_ENGINE = (_PURE + "tests/_solvers/vecchia/test_vecchia_core.py -k 'value_alone or non_positive "
                   "or packed_and_column or prediction_equals and Matern32 "
                   "or dense_reference and Dot'")

#: group -> (environment, {module: tests run against its mutants}). Every
#: module of fastgp/ but the ``__init__.py`` files that hold a docstring or
#: re-exports only, and ``_backend/points.py`` (re-exports only).
GROUPS = {
    "python": ({}, {
        "fastgp/__main__.py": _CLI + " -k 'module or help or version'",
        "fastgp/_backend/covariance.py": "tests/_backend/test_backend_conformance.py "
                                         "tests/_backend/test_kernel_fallback.py "
                                         "tests/_engine/test_product_passes.py",
        "fastgp/_backend/lowering.py": _LOWERING,
        "fastgp/_backend/inputs.py": _BACKEND,
        "fastgp/_backend/kernel_object.py": _BACKEND,
        "fastgp/_backend/products.py": _BACKEND + " tests/_engine/test_product_passes.py",
        "fastgp/_backend/latent.py": "tests/_solvers/cholesky/test_gplvm_gradient.py",
        "fastgp/_backend/vecchia_blocks.py": _VECCHIA,
        "fastgp/_backend/device_covariance.py": _GPU,
        "fastgp/_engine/cuda_passes.py": _GPU,
        "fastgp/_engine/cuda_retarget.py": _GPU,
        "fastgp/_linalg/cuda_tiles.py": _DEVICE_LINALG,
        "fastgp/_linalg/device_blocked.py": _DEVICE_LINALG,
        "fastgp/_linalg/host_tiles.py": _DEVICE_LINALG,
        "fastgp/_linalg/tile_calls.py": _DEVICE_LINALG,
        "fastgp/_solvers/cuda/__init__.py": _GPU,
        "fastgp/_solvers/cuda/device.py": _GPU,
        "fastgp/_solvers/cuda/objective.py": _GPU,
        "fastgp/_solvers/cuda/workspace.py": _GPU,
        "fastgp/_solvers/mean.py": ("tests/estimators/test_mean.py "
                                    "tests/_solvers/test_solver_conformance.py -k mean"),
        "fastgp/_fit/noise.py": "tests/_fit/test_noise_free_fit.py",
        "fastgp/_cli/fit.py": _CLI,
        "fastgp/_cli/table.py": _CLI,
        "fastgp/cli.py": _CLI,
        "fastgp/plotting.py": "tests/cli/test_cli_plot.py",
        "fastgp/_fit/clock.py": "tests/_fit/test_long_fits.py",
        "fastgp/_fit/likelihood.py": "tests/estimators/test_regressor.py tests/estimators/test_sklearn_contract.py "
                                     "tests/_backend/test_kernel_fallback.py",
        "fastgp/_fit/report.py": _FIT,
        "fastgp/_fit/session.py": _FIT,
        "fastgp/_linalg/blas_pool.py": "tests/_linalg/test_blas_pool.py",
        "fastgp/_linalg/blas_threads.py": "tests/estimators/test_reliability_state.py "
                                          "tests/_engine/test_determinism_threads.py",
        "fastgp/_linalg/blocked.py": "tests/_linalg/test_linalg_blocked.py",
        "fastgp/_linalg/lapack.py": "tests/_linalg/test_linalg_blocked.py tests/estimators/test_reliability_pd.py "
                                    "tests/_solvers/cholesky/test_objective.py",
        "fastgp/_linalg/tiles.py": "tests/_linalg/test_linalg_blocked.py",
        "fastgp/_moved.py": _SHIMS,
        "fastgp/covariance.py": _SHIMS,
        "fastgp/linalg.py": _SHIMS,
        "fastgp/memory_budget.py": _SHIMS,
        "fastgp/_optimize/minimize.py": "tests/_optimize/test_reliability_optimizer.py",
        "fastgp/_optimize/rows.py": "tests/estimators/test_gplvm.py",
        "fastgp/_optimize/workers.py": "tests/_optimize/test_parallel_restarts.py -k 'not dask'",
        "fastgp/_solvers/base.py": _FIT,
        "fastgp/_solvers/choice.py": "tests/estimators/test_iterative_regressor.py "
                                     "tests/estimators/test_vecchia_regressor.py",
        "fastgp/_solvers/chunks.py": "tests/estimators/test_regressor.py tests/estimators/test_classifier.py",
        "fastgp/_solvers/predictive.py": "tests/estimators/test_regressor.py tests/estimators/test_classifier.py",
        "fastgp/_solvers/workers.py": "tests/_solvers/iterative/test_distributed_products.py "
                                      "tests/_solvers/vecchia/test_vecchia_distributed.py",
        "fastgp/_solvers/cholesky/__init__.py": _FIT + " tests/estimators/test_regressor.py",
        "fastgp/_solvers/kept_factor.py": _FIT,
        "fastgp/_solvers/workspace.py": _FIT,
        "fastgp/_solvers/cholesky/objective.py": "tests/_solvers/cholesky/test_objective.py "
                                                 "tests/estimators/test_reliability_pd.py",
        "fastgp/_solvers/cholesky/latent.py": "tests/_solvers/cholesky/test_gplvm_gradient.py",
        "fastgp/_solvers/latent_density.py": "tests/_solvers/cholesky/test_gplvm_gradient.py",
        "fastgp/_solvers/cholesky/laplace.py": _CLASSIFIER,
        "fastgp/_solvers/laplace_predictive.py": _CLASSIFIER,
        "fastgp/_solvers/iterative/__init__.py": _ITERATIVE + " tests/estimators/test_iterative_regressor.py",
        "fastgp/_solvers/iterative/diagonal.py": _ITERATIVE,
        "fastgp/_solvers/iterative/distributed.py": "tests/_solvers/iterative/test_distributed_products.py",
        "fastgp/_solvers/iterative/krylov.py": _ITERATIVE,
        "fastgp/_solvers/iterative/objective.py": _ITERATIVE,
        "fastgp/_solvers/iterative/preconditioner.py": _ITERATIVE,
        "fastgp/_solvers/iterative/predict.py": "tests/estimators/test_iterative_regressor.py",
        "fastgp/_solvers/iterative/system.py": _ITERATIVE,
        "fastgp/_solvers/vecchia/__init__.py": _VECCHIA + " " + _FITTED,
        "fastgp/_solvers/vecchia/distributed.py": "tests/_solvers/vecchia/test_vecchia_distributed.py",
        "fastgp/_solvers/vecchia/neighbours.py": _VECCHIA,
        "fastgp/_solvers/vecchia/objective.py": _VECCHIA,
        "fastgp/_solvers/vecchia/ordering.py": _VECCHIA,
        "fastgp/_solvers/vecchia/predict.py": _VECCHIA,
        "fastgp/_solvers/vecchia/scaling.py": _VECCHIA,
        "fastgp/_user_warnings.py": "tests/estimators/test_user_warnings.py",
        "fastgp/_validation.py": "tests/estimators/test_reliability_input.py "
                                 "tests/estimators/test_reliability_bounds.py",
        "fastgp/classifier.py": _CLASSIFIER,
        "fastgp/datasets.py": "tests/cli/test_datasets.py",
        "fastgp/exceptions.py": "tests/project/test_public_names.py tests/estimators/test_reliability_pd.py",
        "fastgp/gplvm.py": "tests/estimators/test_gplvm.py",
        "fastgp/kernels.py": "tests/kernels/test_kernels_ard.py tests/_backend/test_kernel_fallback.py",
        "fastgp/memory/__init__.py": _MEMORY,
        "fastgp/memory/check.py": _MEMORY,
        "fastgp/memory/estimates.py": _MEMORY + " " + _MEMORY_PEAKS,
        "fastgp/memory/ledger.py": _MEMORY,
        "fastgp/memory/ledger_files.py": _MEMORY,
        "fastgp/memory/reading.py": _MEMORY,
        "fastgp/memory/refuse.py": _MEMORY,
        "fastgp/memory/switch.py": _MEMORY,
        "fastgp/memory/units.py": _MEMORY,
        "fastgp/precompile.py": "tests/_engine/test_numba_cache.py -k 'stamp or precompile'",
        "fastgp/regressor.py": "tests/estimators/test_regressor.py " + _FITTED,
        # the two engine modules outside the cache stamp (no compiled code,
        # config.STAMPED_MODULES): a mutant recompiles nothing, and their
        # tests need the JIT itself (compile time, Numba's thread pool)
        "fastgp/_engine/compile_time.py": "tests/_fit/test_long_fits.py -k compilation",
        "fastgp/_engine/threads.py": "tests/_engine/test_threads.py",
    }),
    "engine": ({"NUMBA_DISABLE_JIT": "1"}, {
        "fastgp/_engine/address_call.py": _ENGINE_CORE,
        "fastgp/_engine/config.py": _ENGINE_CORE,
        "fastgp/_engine/interpreter.py": _ENGINE_CORE,
        "fastgp/_engine/leaves.py": _ENGINE_CORE,
        "fastgp/_engine/opcodes.py": _ENGINE_CORE,
        "fastgp/_engine/passes.py": _PASSES,
        "fastgp/_engine/signatures.py": _ENGINE_CORE,
        "fastgp/_engine/latent_passes.py": (
            _PURE + "tests/_solvers/cholesky/test_gplvm_gradient.py -k 'not 255 and not 257 and not thread "
            "and not read_only and not equals_regression'"),
        "fastgp/_engine/product_passes.py": (_PURE + "tests/_engine/test_product_passes.py "
                                              "-k '(Matern12 or pair_schedule) and not thread "
                                              "and not fallback'"),
        "fastgp/_engine/maxmin.py": (_PURE + "tests/_solvers/vecchia/test_vecchia_core.py "
                                     "-k 'maxmin and 200 or ties or outliers or random_order "
                                     "or update_pairs_filter'"),
        "fastgp/_engine/lanes.py": _VECCHIA_ENGINE,
        "fastgp/_engine/vecchia_batch.py": _VECCHIA_ENGINE,
        "fastgp/_engine/vecchia_block.py": _VECCHIA_ENGINE,
        "fastgp/_engine/vecchia_passes.py": _VECCHIA_ENGINE,
        "fastgp/_engine/vecchia_workers.py": _VECCHIA_ENGINE,
        "fastgp/_engine/vector_math.py": (_PURE + "tests/_engine/test_vector_math.py "
                                          "-k 'not large_and_special'"),
    }),
}

#: "all": every group in turn, one budget
ALL = ("python", "engine")

#: Modules with nothing to mutate but imports, re-exports or a docstring.
NOT_MUTATED = ("fastgp/__init__.py", "fastgp/_backend/__init__.py", "fastgp/_backend/points.py",
               "fastgp/_cli/__init__.py", "fastgp/_engine/__init__.py", "fastgp/_fit/__init__.py",
               "fastgp/_linalg/__init__.py", "fastgp/_optimize/__init__.py",
               "fastgp/_solvers/__init__.py")

#: The results file: one run kept (git history keeps the earlier ones).
RESULT = RESULTS / "run.json"


def wilson_interval(killed, run, z=1.959964):
    """The 95 % Wilson score interval of a kill rate from ``killed`` of
    ``run`` mutants drawn at random from a module's mutants (Wilson 1927;
    Brown, Cai and DasGupta 2001 recommend it over the normal interval for
    small samples and rates near 1). Returns (low, high); (0, 1) when
    nothing ran. Every mutant run: the rate itself, no interval."""
    if run == 0:
        return 0.0, 1.0
    p = killed / run
    centre = (p + z * z / (2 * run)) / (1 + z * z / run)
    half = z / (1 + z * z / run) * (p * (1 - p) / run + z * z / (4 * run * run)) ** 0.5
    return max(0.0, centre - half), min(1.0, centre + half)


def markdown_table(report):
    """The results of a run as docs/testing.md's table (markdown lines)."""
    lines = ["| module | mutants | run | killed | survived | kill rate | 95 % interval |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    totals = [0, 0, 0, 0]
    for module, entry in report["modules"].items():
        killed, survived = entry.get("killed", 0), entry.get("survived", 0)
        run = killed + survived
        if run == entry["mutants"]:
            interval = "every mutant"
        else:
            low, high = wilson_interval(killed, run)
            interval = f"{100 * low:.0f}-{100 * high:.0f} %"
        rate = f"{100 * killed / run:.0f} %" if run else "-"
        lines.append(f"| `{module.removeprefix('fastgp/')}` | {entry['mutants']:,} | {run} | "
                     f"{killed} | {survived} | {rate} | {interval} |")
        for i, value in enumerate((entry["mutants"], run, killed, survived)):
            totals[i] += value
    lines.append(f"| **{len(report['modules'])} modules** | {totals[0]:,} | {totals[1]} | "
                 f"{totals[2]} | {totals[3]} | {100 * totals[2] / max(totals[1], 1):.0f} % | |")
    return lines


def _copy_tree(destination):
    """fastgp/ (with its Numba cache), tests/, docs/ and bench/ (some tests read
    them), README.md and pyproject.toml into destination."""
    for name in ("fastgp", "tests", "docs", "bench"):
        shutil.copytree(REPO / name, destination / name, symlinks=True,
                        ignore=shutil.ignore_patterns("results", "_build"))
    for name in ("README.md", "pyproject.toml"):
        shutil.copy2(REPO / name, destination / name)


def _config(tree, module, tests, timeout):
    path = tree / (Path(module).stem + ".toml")
    path.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{module}"\n'
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f'test-command = "{_PYTEST} {tests}"\n'
        "[cosmic-ray.distributor]\n"
        'name = "local"\n'
    )
    return path


def _sample(session, per_module, every_below=0):
    """Keep ``per_module`` mutants of the session, chosen with SEED (every
    one where the module has at most ``every_below``); returns (number of
    mutants, number kept)."""
    with sqlite3.connect(session) as db:
        rows = db.execute(
            "SELECT job_id, operator_name, occurrence, start_pos_row, start_pos_col "
            "FROM mutation_specs").fetchall()
        ordered = sorted(rows, key=lambda r: (r[1], r[2], r[3], r[4]))
        size = len(rows) if len(rows) <= every_below else min(per_module, len(rows))
        keep = {r[0] for r in random.Random(SEED).sample(ordered, size)}
        drop = [(r[0],) for r in rows if r[0] not in keep]
        db.executemany("DELETE FROM mutation_specs WHERE job_id = ?", drop)
        db.executemany("DELETE FROM work_items WHERE job_id = ?", drop)
    return len(rows), len(keep)


def _outcomes(session):
    with sqlite3.connect(session) as db:
        specs = {r[0]: r[1:] for r in db.execute(
            "SELECT job_id, operator_name, occurrence, start_pos_row FROM mutation_specs")}
        results = db.execute(
            "SELECT job_id, worker_outcome, test_outcome, diff FROM work_results").fetchall()
    done = {job for job, *_ in results}
    out = {"killed": 0, "survived": 0, "incompetent": 0, "not_run": len(set(specs) - done),
           "survivors": []}
    for job, worker, test, diff in results:
        test = (test or "").lower()
        if "killed" in test:
            out["killed"] += 1
        elif "survived" in test:
            out["survived"] += 1
            operator, occurrence, row = specs[job]
            out["survivors"].append({"operator": operator, "occurrence": occurrence,
                                     "line": row, "diff": diff})
        else:
            out["incompetent"] += 1
    return out


def _run(command, cwd, env, timeout):
    """Run command in its own process group; on timeout kill the whole group
    (cosmic-ray and the pytest it started). Returns (process or None, timed out)."""
    process = subprocess.Popen(command, cwd=cwd, env=env, start_new_session=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               shell=isinstance(command, str))
    try:
        out, _ = process.communicate(timeout=timeout)
        return process.returncode, out, False
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, _ = process.communicate()
        return process.returncode, out, True


def _write(report, path):
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(report, indent=1))
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("group", choices=sorted(GROUPS) + ["all"])
    parser.add_argument("--per-module", type=int, default=10)
    parser.add_argument("--every-below", type=int, default=0,
                        help="run every mutant of a module that has at most this many")
    parser.add_argument("--budget-s", type=float, default=540.0,
                        help="for the whole run; each module gets at most twice its fair share "
                             "of what is left (what is left over passes on)")
    parser.add_argument("--timeout-s", type=float, default=60.0,
                        help="per mutant, at least 4x the unmutated run (cosmic-ray "
                             "counts a timeout as killed)")
    parser.add_argument("--baseline-max-s", type=float, default=300.0,
                        help="an unmutated selection slower than this is not used")
    parser.add_argument("--modules", nargs="*", help="a subset of the group's modules")
    parser.add_argument("--output", type=Path, default=RESULT,
                        help=f"the results file (default: {RESULT.relative_to(REPO)})")
    parser.add_argument("--list", action="store_true", help="count mutants, run none")
    parser.add_argument("--table", action="store_true",
                        help="print the results file as docs/testing.md's table, run nothing")
    args = parser.parse_args(argv)
    if args.table:
        print("\n".join(markdown_table(json.loads(args.output.read_text()))))
        return 0
    groups = ALL if args.group == "all" else (args.group,)
    plan = [(group, module, tests) for group in groups
            for module, tests in GROUPS[group][1].items()
            if not args.modules or module in args.modules]
    if args.modules and len(plan) != len(set(args.modules)):
        sys.exit(f"not in the group: {sorted(set(args.modules) - {m for _, m, _ in plan})}")
    result_path = args.output
    deadline = time.monotonic() + args.budget_s
    report = {"group": args.group, "seed": SEED, "per_module": args.per_module,
              "every_below": args.every_below,
              "budget_s": args.budget_s, "started": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                 time.gmtime()),
              "environment": {g: GROUPS[g][0] for g in groups}, "complete": False,
              "modules": {}}
    with tempfile.TemporaryDirectory(prefix="fastgp-mutation-") as tmp:
        tree = Path(tmp)
        _copy_tree(tree)
        baselines = {}
        for index, (group, module, tests) in enumerate(plan):
            env = dict(os.environ, **GROUPS[group][0])
            env["PYTHONPATH"] = f"{tree}{os.pathsep}{tree / 'tests'}"
            entry = {"group": group, "tests": tests}
            config = _config(tree, module, tests, args.timeout_s)
            session = tree / (module.replace("/", "_") + ".sqlite")
            subprocess.run(["cosmic-ray", "init", str(config), str(session)], cwd=tree,
                           env=env, check=True)
            total, kept = _sample(session, 0 if args.list else args.per_module,
                                  0 if args.list else args.every_below)
            key = (group, tests)
            if key not in baselines and kept and time.monotonic() < deadline:
                # the selection must pass on the unmutated sources, or every
                # mutant would count as killed
                start = time.monotonic()
                code, out, late = _run(f"{_PYTEST} {tests}", tree, env, args.baseline_max_s)
                baselines[key] = (time.monotonic() - start,
                                  "too slow" if late else "fails" if code else None)
                if baselines[key][1]:
                    print(f"{module}: the unmutated selection {baselines[key][1]}:\n"
                          f"{out[-2000:]}", flush=True)
            seconds, problem = baselines.get(key, (0.0, None))
            timeout = max(args.timeout_s, 4 * seconds)
            _config(tree, module, tests, timeout)  # the timeout is read at exec
            entry.update({"mutants": total, "sample": kept, "baseline_s": round(seconds, 1),
                          "timeout_s": timeout})
            if problem:
                entry["baseline"] = problem
            # twice the fair share of what is left: a module may borrow from
            # the later ones, most of which need less than their share
            left = deadline - time.monotonic()
            share = min(left, 2 * left / (len(plan) - index))
            if kept and share > 0 and key in baselines and not problem:
                start = time.monotonic()
                _, _, late = _run(["cosmic-ray", "exec", str(config), str(session)],
                                  tree, env, share)
                if late:
                    entry["stopped"] = "budget"
                    # cosmic-ray mutates in place: put back the module it was stopped in
                    shutil.copy2(REPO / module, tree / module)
                entry["seconds"] = round(time.monotonic() - start, 1)
            if kept:
                entry.update(_outcomes(session))
                run = entry["killed"] + entry["survived"]
                entry["interval_95"] = [round(x, 3) for x in
                                        wilson_interval(entry["killed"], run)]
            report["modules"][module] = entry
            print(json.dumps({module: {k: v for k, v in entry.items() if k != "survivors"}}),
                  flush=True)
            if not args.list:
                _write(report, result_path)  # after each module: a stopped run keeps what ran
    report["complete"] = True
    report["finished"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    if not args.list:
        print(f"wrote {_write(report, result_path)}")


if __name__ == "__main__":
    sys.exit(main())
