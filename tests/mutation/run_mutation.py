"""Mutation testing of fastgp's numerical core with cosmic-ray (docs/testing.md).

    python tests/mutation/run_mutation.py python --per-module 14 --budget-s 540
    python tests/mutation/run_mutation.py engine --per-module 8 --budget-s 540
    python tests/mutation/run_mutation.py python --modules fastgp/_backend/lowering.py --list

Two groups, because Numba makes a mutant of the engine expensive: any change
to ``fastgp/_engine/*.py`` changes the package-wide cache stamp, so every
routine recompiles (40-60 s a mutant).

- ``python``: the Python-layer numerical core (lowering, the objectives, the
  linear algebra, the fit core, the optimiser). The engine is unchanged, so
  its compiled code comes from Numba's cache; each mutant runs a targeted
  test selection (seconds).
- ``engine``: the interpreter, the leaves and the passes, run as plain Python
  (``NUMBA_DISABLE_JIT=1`` with the ``mutation.pure_python`` plugin) on a
  selection of small-N tests.

For each module, cosmic-ray (``cosmic-ray init``) lists every mutant; a
random sample of ``--per-module`` of them (``random.Random(SEED)`` over the
mutants sorted by operator, occurrence and position, so the sample is the
same on every run of the same sources) is kept and the rest deleted from the
session before ``cosmic-ray exec`` runs it. Everything happens in a copy of
the source tree in a temporary folder (cosmic-ray mutates files in place).
Each test selection first runs on the unmutated copy and must pass (else
every mutant would count as killed); a mutant's timeout is at least 4x that
run. A group stops after ``--budget-s`` seconds; mutants not run by then are
reported as not run. A mutant whose tests time out counts as killed
(cosmic-ray's rule).

Writes tests/mutation/results/<group>.json: per module, the number of
mutants, the sample, killed, survived, not run, and each survivor's diff.
"""

import argparse
import json
import os
import random
import shutil
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

#: group -> (environment, {module: tests run against its mutants})
GROUPS = {
    "python": ({}, {
        "fastgp/_backend/lowering.py": "tests/test_lowering.py tests/test_kernels_fastpath.py",
        "fastgp/_solvers/cholesky/objective.py": "tests/test_objective.py tests/test_reliability_pd.py",
        "fastgp/_solvers/cholesky/latent.py": "tests/test_gplvm_gradient.py",
        "fastgp/_linalg/lapack.py": "tests/test_linalg_blocked.py tests/test_reliability_pd.py "
                            "tests/test_objective.py",
        "fastgp/_linalg/blocked.py": "tests/test_linalg_blocked.py",
        "fastgp/_fit/session.py": "tests/test_fitting.py tests/test_reliability_pd.py",
        "fastgp/_optimize/minimize.py": "tests/test_reliability_optimizer.py",
    }),
    "engine": ({"NUMBA_DISABLE_JIT": "1"}, {
        module: ("-p mutation.pure_python tests/test_engine_interpreter.py "
                 "tests/test_covariance_passes.py tests/test_gplvm_gradient.py "
                 "-k 'not 255 and not 257 and not thread and not read_only "
                 "and not equals_regression'")
        for module in ("fastgp/_engine/interpreter.py", "fastgp/_engine/leaves.py",
                       "fastgp/_engine/passes.py", "fastgp/_engine/latent_passes.py")
    }),
}


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


def _sample(session, per_module):
    """Keep ``per_module`` mutants of the session, chosen with SEED; returns
    (number of mutants, number kept)."""
    with sqlite3.connect(session) as db:
        rows = db.execute(
            "SELECT job_id, operator_name, occurrence, start_pos_row, start_pos_col "
            "FROM mutation_specs").fetchall()
        ordered = sorted(rows, key=lambda r: (r[1], r[2], r[3], r[4]))
        keep = {r[0] for r in random.Random(SEED).sample(ordered, min(per_module, len(rows)))}
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("group", choices=sorted(GROUPS))
    parser.add_argument("--per-module", type=int, default=10)
    parser.add_argument("--budget-s", type=float, default=540.0)
    parser.add_argument("--timeout-s", type=float, default=60.0,
                        help="per mutant, at least 4x the unmutated run (cosmic-ray "
                             "counts a timeout as killed)")
    parser.add_argument("--modules", nargs="*", help="a subset of the group's modules")
    parser.add_argument("--list", action="store_true", help="count mutants, run none")
    args = parser.parse_args(argv)
    environment, modules = GROUPS[args.group]
    if args.modules:
        modules = {m: modules[m] for m in args.modules}
    env = dict(os.environ, **environment)
    deadline = time.monotonic() + args.budget_s
    report = {"group": args.group, "seed": SEED, "per_module": args.per_module,
              "environment": environment, "modules": {}}
    with tempfile.TemporaryDirectory(prefix="fastgp-mutation-") as tmp:
        tree = Path(tmp)
        _copy_tree(tree)
        env["PYTHONPATH"] = f"{tree}{os.pathsep}{tree / 'tests'}"
        baselines = {}
        for module, tests in modules.items():
            if tests not in baselines and not args.list:
                # the selection must pass on the unmutated sources, or every
                # mutant would count as killed
                start = time.monotonic()
                run = subprocess.run(f"{_PYTEST} {tests}", shell=True, cwd=tree, env=env,
                                     capture_output=True, text=True)
                if run.returncode != 0:
                    sys.exit(f"the selection fails without a mutant:\n{run.stdout[-3000:]}")
                baselines[tests] = time.monotonic() - start
            timeout = max(args.timeout_s, 4 * baselines.get(tests, 0.0))
            config = _config(tree, module, tests, timeout)
            session = tree / (Path(module).stem + ".sqlite")
            subprocess.run(["cosmic-ray", "init", str(config), str(session)], cwd=tree,
                           env=env, check=True)
            total, kept = _sample(session, 0 if args.list else args.per_module)
            entry = {"mutants": total, "sample": kept, "tests": tests,
                     "baseline_s": round(baselines.get(tests, 0.0), 1), "timeout_s": timeout}
            left = deadline - time.monotonic()
            if kept and left > 0:
                start = time.monotonic()
                try:
                    subprocess.run(["cosmic-ray", "exec", str(config), str(session)],
                                   cwd=tree, env=env, timeout=left)
                except subprocess.TimeoutExpired:
                    entry["stopped"] = "budget"
                entry["seconds"] = round(time.monotonic() - start, 1)
                entry.update(_outcomes(session))
            elif kept:
                entry.update(_outcomes(session))
            report["modules"][module] = entry
            print(json.dumps({module: {k: v for k, v in entry.items() if k != "survivors"}}),
                  flush=True)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{args.group}.json"
    out.write_text(json.dumps(report, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
