"""The mutation runner (tests/mutation/run_mutation.py, docs/testing.md,
"Mutation testing"): every module of fastgp/ has a test selection or is
listed as holding nothing to mutate, and the kill rate's interval is
Wilson's."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def runner():
    spec = importlib.util.spec_from_file_location(
        "run_mutation", ROOT / "tests" / "mutation" / "run_mutation.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mutation_runner_covers_every_module_of_the_package():
    run_mutation = runner()
    selected = [module for _, modules in run_mutation.GROUPS.values() for module in modules]
    assert len(selected) == len(set(selected)), "a module in two groups"
    package = {path.relative_to(ROOT).as_posix() for path in (ROOT / "fastgp").rglob("*.py")}
    assert set(selected) | set(run_mutation.NOT_MUTATED) == package
    assert not set(selected) & set(run_mutation.NOT_MUTATED)
    for module in selected:
        assert (ROOT / module).is_file()


@pytest.mark.parametrize("killed, run, low, high", [
    # Brown, Cai and DasGupta (2001), and the closed form at p = 1:
    # low = n / (n + z^2)
    (10, 10, 10 / (10 + 1.959964 ** 2), 1.0),
    (0, 10, 0.0, 1 - 10 / (10 + 1.959964 ** 2)),
    (5, 10, 0.2366, 0.7634),
])
def test_mutation_runner_wilson_interval(killed, run, low, high):
    got = runner().wilson_interval(killed, run)
    assert got == pytest.approx((low, high), abs=1e-4)


def test_mutation_runner_table_says_where_every_mutant_ran():
    report = {"modules": {
        "fastgp/a.py": {"mutants": 4, "killed": 3, "survived": 1},
        "fastgp/b.py": {"mutants": 100, "killed": 9, "survived": 1},
    }}
    lines = runner().markdown_table(report)
    assert "| `a.py` | 4 | 4 | 3 | 1 | 75 % | every mutant |" in lines
    assert "| `b.py` | 100 | 10 | 9 | 1 | 90 % | 60-98 % |" in lines
    assert lines[-1].startswith("| **2 modules** | 104 | 14 | 12 | 2 | 86 % |")
