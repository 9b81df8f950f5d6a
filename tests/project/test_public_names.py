"""Users' imports keep working (docs/design.md, "The package"): every public
name of fastgp, fastgp.memory and fastgp.kernels, and each warning and error
class where docs/api.rst lists it, both in fastgp.exceptions and at the older
places (docs/api.rst, "Warnings and errors"): as they are, or with a
DeprecationWarning that names the new place."""

import importlib
import re
import warnings
from pathlib import Path

import pytest

import fastgp
from fastgp import exceptions

API_RST = Path(__file__).resolve().parents[2] / "docs" / "api.rst"

#: Names users import from each public module; each stays importable there
#: (a module may add names, never lose these).
PUBLIC = {
    "fastgp": ["GaussianProcessRegressor", "GaussianProcessClassifier", "GPLVM",
               "NumbaCacheWarning", "__version__"],
    "fastgp.kernels": ["RationalQuadratic", "ExpSineSquared", "fast_path", "FastPath"],
    "fastgp.memory": ["InsufficientMemoryError", "MemoryReading", "available_memory",
                      "check_memory", "skip_memory_check", "memory_check_enabled",
                      "format_bytes", "refusal", "fit_bytes", "iterative_fit_bytes",
                      "fits_in_memory", "gplvm_fit_bytes", "laplace_fit_bytes",
                      "log_marginal_likelihood_bytes", "predict_cov_bytes",
                      "sample_y_bytes", "SKIP_ENV"],
}

#: Classes at the places earlier releases documented, kept as they are.
KEPT = [("fastgp", "NumbaCacheWarning"),
        ("fastgp.memory", "InsufficientMemoryError"),
        ("fastgp.plotting", "MissingMatplotlibError")]

#: Old import paths that still work with a DeprecationWarning: shim -> {name:
#: the module that defines it now}.
MOVED = {
    "fastgp.covariance": {"SlowKernelWarning": "fastgp.exceptions"},
    "fastgp.linalg": {name: "fastgp.exceptions" for name in (
        "JitterWarning", "NotPositiveDefiniteError", "NonFiniteMatrixError")},
    "fastgp.memory_budget": {
        "MemoryWaitWarning": "fastgp.exceptions",
        **{name: "fastgp.memory.ledger" for name in (
            "LIMIT_ENV", "LEDGER_ENV", "TIMEOUT_ENV", "reserve", "budget_reading",
            "parse_memory_size", "memory_limit", "wait_timeout", "ledger_dir")}},
}


@pytest.mark.parametrize("module, name", [(m, n) for m, names in PUBLIC.items()
                                          for n in names])
def test_public_name_imports_from_its_module_without_a_warning(module, name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        namespace = {}
        exec(f"from {module} import {name}", namespace)
    assert name in importlib.import_module(module).__all__


@pytest.mark.parametrize("module", sorted(PUBLIC) + ["fastgp.exceptions"])
def test_public_star_import_gives_every_name_of_all(module):
    namespace = {}
    exec(f"from {module} import *", namespace)
    missing = set(importlib.import_module(module).__all__) - set(namespace)
    assert not missing, missing


@pytest.mark.parametrize("module, name", KEPT)
def test_public_class_kept_where_it_was_is_the_one_in_exceptions(module, name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kept = getattr(importlib.import_module(module), name)
    assert kept is getattr(exceptions, name)


@pytest.mark.parametrize("shim, name", [(s, n) for s, names in MOVED.items() for n in names])
def test_public_moved_name_warns_and_is_the_new_one(shim, name):
    target = MOVED[shim][name]
    module = importlib.import_module(shim)
    moved = rf"{re.escape(shim)}\.{name} has moved to {re.escape(target)}\.{name}"
    with pytest.warns(DeprecationWarning, match=moved) as record:
        old = getattr(module, name)
    assert old is getattr(importlib.import_module(target), name)
    # the warning points at the line that used the old path, not at the shim
    assert [w.filename for w in record] == [__file__]


@pytest.mark.parametrize("shim", sorted(MOVED))
def test_public_shim_refuses_a_name_it_never_had(shim):
    never = rf"module '{re.escape(shim)}' has no attribute 'Nothing'"
    with pytest.raises(AttributeError, match=never):
        getattr(importlib.import_module(shim), "Nothing")


def _api_rst_names(module):
    """The names docs/api.rst lists (autosummary entries) under
    ``.. currentmodule:: module``."""
    names, current = set(), None
    for line in API_RST.read_text().splitlines():
        match = re.match(r"\.\. currentmodule:: (\S+)", line)
        if match:
            current = match[1]
        elif current == module and re.fullmatch(r"   [A-Za-z_]\w*", line):
            names.add(line.strip())
    return names


def test_public_api_rst_lists_every_warning_and_error():
    # "every warning and error fastgp raises ... in one module": the page
    # lists each class of fastgp.exceptions, and each one it lists exists
    assert _api_rst_names("fastgp.exceptions") == set(exceptions.__all__)
    for name in exceptions.__all__:
        assert issubclass(getattr(exceptions, name), Exception), name


def test_public_names_of_the_top_level_are_documented():
    assert set(fastgp.__all__) - {"__version__", "NumbaCacheWarning"} <= _api_rst_names("fastgp")



def test_public_names_of_the_datasets_are_all_on_the_api_page():
    # a loader added without its entry has no page (the Heaton one had none)
    from fastgp import datasets

    assert _api_rst_names("fastgp.datasets") == set(datasets.__all__)
