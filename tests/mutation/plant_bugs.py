"""Plant known bug classes into a copy of fastgp, one at a time, and check
that a named test selection catches each (at least one test fails).

    python tests/mutation/plant_bugs.py            # every bug class
    python tests/mutation/plant_bugs.py --list     # what would run
    python tests/mutation/plant_bugs.py --only ledger-follows-symlink

The bug classes a review found that no test could fail (docs/testing.md,
"Bug classes planted by hand"). For each, tests/mutation/planted/<name>.patch
(a unified diff against the sources; ``git apply`` tolerates lines that
moved, and a patch that no longer applies is reported) is applied to a fresh
copy of the checkout's fastgp/, tests/, bench/, docs/, pyproject.toml and
README.md in a temporary folder (as tests/mutation/run_mutation.py's
_copy_tree does: fastgp's __pycache__ included, so Numba's cache is reused;
no patch touches a module of fastgp/_engine/config.py's STAMPED_MODULES,
which would recompile every routine), and

    python -m pytest -x -q -p no:cacheprovider -p no:randomly <selection>

runs there with PYTHONPATH=<tmp>:<tmp>/tests and cwd=<tmp>. Before the
patches, each selection runs once on an unpatched copy and must pass
(else its bug classes are reported as "selection fails unpatched"); the
Numba cache files that run writes are copied into every patched copy, so
routines compiled once are not compiled again.

Prints one JSON line per baseline ({"baseline": ...}) and one per bug class:
name, selection, patched (file:line), caught (pytest's exit code is 1),
first_failure (the first failing test's node id), exit_code, seconds. Exit
status 0 where every bug class run was caught, 1 otherwise.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PATCHES = Path(__file__).resolve().parent / "planted"
PYTEST = ["-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]

_LEDGER = "tests/memory/test_reliability_ledger.py"
_JOINT = "tests/_solvers/test_solver_conformance.py -k joint_prediction_memory"
_FITTED = "tests/estimators/test_fitted_state.py"

#: (name, selection, what the patch plants), in the order they run
BUGS = [
    ("vecchia-seed",
     "tests/estimators/test_vecchia_regressor.py::"
     "test_vecchia_above_the_exact_ordering_gives_the_same_bits_for_the_same_seed",
     "the approximate maxmin ordering (N > EXACT_BELOW) ignores random_state "
     "(check_random_state(None))"),
    ("relayout-stops",
     "tests/estimators/test_vecchia_regressor.py::"
     "test_vecchia_neighbours_found_again_when_length_scales_move",
     "after a relayout of Vecchia's neighbours the optimiser is not run again "
     "(the published theta is the previous layout's optimum)"),
    ("vecchia-joint-estimate-low", _JOINT,
     "vecchia_predict_cov_bytes (predict(return_cov=True), sample_y) x 0.22"),
    ("iterative-predict-cov-estimate-low", _JOINT,
     "iterative_predict_cov_bytes x 0.22"),
    ("clock-counts-compilation", "tests/_fit/test_long_fits.py",
     "the long-fit clock counts Numba's compile seconds as evaluation time"),
    ("ledger-timeout-unit", _LEDGER,
     "the ledger lock's retry deadline read as milliseconds (waits 1/1000 of "
     "the setting; the warning still names the setting)"),
    ("ledger-timeout-long", _LEDGER,
     "the ledger lock is retried 16 x the setting (0.3 s -> 4.8 s, under the "
     "wall-clock test's 5 s)"),
    ("ledger-follows-symlink", _LEDGER,
     "reservation files opened without O_NOFOLLOW: a symlinked entry is "
     "followed and its target counted"),
    ("ledger-other-user-shared", _LEDGER,
     "the owner check applied in a shared ledger too: a team member's live "
     "reservation is ignored"),
    ("ledger-other-user-private", _LEDGER,
     "no owner check: another user's live entry in the private ledger is "
     "read as this user's"),
    ("cli-test-fraction", "tests/cli/test_cli.py",
     "fastgp fit --test-fraction fits on every row, the held-out ones included"),
    ("predict-reads-params", _FITTED,
     "predictions (_fitted()) read the constructor's alpha instead of the "
     "fitted diagonal"),
    ("lml-reads-params", _FITTED,
     "log_marginal_likelihood(theta) reads the constructor's alpha instead of "
     "the fitted diagonal"),
    ("mean-none-reaches-gls", "tests/estimators/test_mean.py -k mean_none",
     "mean=None is taken as a constant mean and goes through the GLS"),
    ("noise-free-warning-silent", "tests/_fit/test_noise_free_fit.py",
     "every kernel counts as having a noise term: the noise-free warning "
     "never fires"),
]


def _copy_tree(destination):
    """fastgp/ (with its Numba cache), tests/, docs/ and bench/, README.md
    and pyproject.toml of the checkout's working tree into destination."""
    for name in ("fastgp", "tests", "docs", "bench"):
        shutil.copytree(REPO / name, destination / name, symlinks=True,
                        ignore=shutil.ignore_patterns("results", "_build"))
    for name in ("README.md", "pyproject.toml"):
        shutil.copy2(REPO / name, destination / name)


def _overlay_numba_cache(source, destination):
    """Numba's cache files (.nbi, .nbc) under source/fastgp into the same
    places under destination/fastgp (the baseline's compiled routines)."""
    for path in (source / "fastgp").rglob("*.nb[ic]"):
        target = destination / path.relative_to(source)
        if target.parent.is_dir():
            shutil.copy2(path, target)


def _env(tree):
    env = dict(os.environ)
    env["PYTHONPATH"] = f"{tree}{os.pathsep}{tree / 'tests'}"
    return env


def _run(command, tree, timeout):
    """(exit code or None on timeout, output, seconds): ``command`` in its
    own process group, the whole group killed at the timeout (pytest's
    children included)."""
    start = time.monotonic()
    process = subprocess.Popen(command, cwd=tree, env=_env(tree), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = process.communicate(timeout=timeout)
        code = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, _ = process.communicate()
        code = None
    return code, out, round(time.monotonic() - start, 1)


def _pytest(python, selection, tree, timeout):
    return _run([python, *PYTEST, *shlex.split(selection)], tree, timeout)


def _first_failure(output):
    """The first failing (or erroring) test's node id in pytest's output:
    its short summary (``-ra``) line, else the failure's header."""
    for line in output.splitlines():
        match = re.match(r"(?:FAILED|ERROR) (\S+)(?: - |$)", line.strip())
        if match:
            return match.group(1)
    match = re.search(r"^_{3,} (.+?) _{3,}$", output, re.M)
    return match.group(1) if match else None


def _patched_lines(patch):
    """["file:line", ...]: the first changed line of each hunk, in the
    patched file's numbering."""
    places, path, line = [], None, None
    for text in patch.read_text().splitlines():
        if text.startswith("+++ "):
            path = text[4:].removeprefix("b/")
        elif text.startswith("@@"):
            line = int(re.match(r"@@ -\d+(?:,\d+)? \+(\d+)", text).group(1))
            seen = False
        elif line is not None and not text.startswith("\\"):
            if text[:1] in "+-" and not seen:
                places.append(f"{path}:{line}")
                seen = True
            if text[:1] != "-":
                line += 1
    return places


def _stamped_modules():
    """fastgp/_engine/config.py's STAMPED_MODULES, read from its source."""
    text = (REPO / "fastgp/_engine/config.py").read_text()
    match = re.search(r"^STAMPED_MODULES = \(([^)]*)\)", text, re.M)
    return set(re.findall(r'"(\w+)"', match.group(1))) if match else set()


def _touches_stamped(places):
    """The patched files that are stamped engine modules (a patch there makes
    Numba recompile every routine: 40-60 s more)."""
    stamped = {f"fastgp/_engine/{name}.py" for name in _stamped_modules()}
    return sorted({place.rsplit(":", 1)[0] for place in places} & stamped)


def _apply(patch, tree):
    """Apply ``patch`` in ``tree`` (git apply, else patch -p1); (ok, output)."""
    if shutil.which("git"):
        command = ["git", "apply", "--whitespace=nowarn", str(patch)]
    else:
        command = ["patch", "-p1", "--forward", "--batch", "-i", str(patch)]
    result = subprocess.run(command, cwd=tree, capture_output=True, text=True)
    return result.returncode == 0, result.stdout + result.stderr


def _emit(record):
    print(json.dumps(record), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", metavar="NAME",
                        help="run this bug class only (repeatable)")
    parser.add_argument("--list", action="store_true",
                        help="list the bug classes, their selections and patched lines")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--timeout-s", type=float, default=900.0,
                        help="limit of each pytest run (default 900 s)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the temporary trees (their paths are printed)")
    args = parser.parse_args()

    names = [name for name, _, _ in BUGS]
    if args.only:
        unknown = sorted(set(args.only) - set(names))
        if unknown:
            parser.error(f"unknown bug class(es) {', '.join(unknown)}; --list names them")
    bugs = [bug for bug in BUGS if not args.only or bug[0] in args.only]
    for name, _, _ in bugs:
        if not (PATCHES / f"{name}.patch").is_file():
            parser.error(f"{PATCHES / (name + '.patch')} is missing")

    if args.list:
        for name, selection, what in bugs:
            places = _patched_lines(PATCHES / f"{name}.patch")
            _emit({"name": name, "selection": selection, "patched": places,
                   "stamped": _touches_stamped(places), "plants": what})
        return 0

    work = Path(tempfile.mkdtemp(prefix="fastgp-plant-"))
    all_caught = True
    try:
        # the unpatched baseline: every selection once, in one tree whose
        # Numba cache the patched trees then start from
        base = work / "base"
        base.mkdir()
        _copy_tree(base)
        code, out, _ = _run([args.python, "-c", "import fastgp; print(fastgp.__file__)"],
                            base, 300)
        imported = out.strip().splitlines()[-1] if out.strip() else ""
        if code != 0 or not imported.startswith(str(base)):
            _emit({"error": "the copied tree's fastgp is not the one imported",
                   "imported": imported, "output": out[-2000:]})
            return 2
        baseline = {}
        for selection in dict.fromkeys(selection for _, selection, _ in bugs):
            code, out, seconds = _pytest(args.python, selection, base, args.timeout_s)
            baseline[selection] = code == 0
            record = {"baseline": selection, "passed": code == 0, "exit_code": code,
                      "seconds": seconds}
            if code != 0:
                record["first_failure"] = _first_failure(out)
                record["output_tail"] = out[-3000:]
            _emit(record)

        for name, selection, what in bugs:
            patch = PATCHES / f"{name}.patch"
            record = {"name": name, "selection": selection,
                      "patched": _patched_lines(patch)}
            stamped = _touches_stamped(record["patched"])
            if stamped:
                record["stamped"] = stamped  # Numba recompiles every routine
            if not baseline[selection]:
                record.update(caught=None, error="selection fails unpatched")
                all_caught = False
                _emit(record)
                continue
            tree = work / name
            tree.mkdir()
            _copy_tree(tree)
            _overlay_numba_cache(base, tree)
            ok, text = _apply(patch, tree)
            if not ok:
                record.update(caught=None, error="the patch does not apply", output=text)
                all_caught = False
                _emit(record)
                continue
            code, out, seconds = _pytest(args.python, selection, tree, args.timeout_s)
            record.update(caught=code == 1, first_failure=_first_failure(out),
                          exit_code=code, seconds=seconds)
            if code is None:
                record["error"] = f"timed out after {args.timeout_s:g} s"
            elif code not in (0, 1):
                record["error"] = f"pytest exit code {code}"
                record["output_tail"] = out[-3000:]
            all_caught &= code == 1
            _emit(record)
            if not args.keep:
                shutil.rmtree(tree, ignore_errors=True)
    finally:
        if args.keep:
            print(f"# trees kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if all_caught else 1


if __name__ == "__main__":
    sys.exit(main())
