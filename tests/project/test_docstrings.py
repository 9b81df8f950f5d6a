"""Every public docstring passes numpydoc's validation, and displaying an
estimator in Jupyter (scikit-learn's HTML repr, which parses the docstring
with numpydoc's rules) emits no warning."""

import warnings

import pytest

from numpydoc import validate as numpydoc_validate  # noqa: E402

import fastgp  # noqa: E402
import fastgp.datasets  # noqa: E402
import fastgp.exceptions  # noqa: E402
import fastgp.kernels  # noqa: E402
import fastgp.memory  # noqa: E402

#: Checks not enforced, and why:
#: SA01 "See Also" section: a cross-reference is given where a relative
#:      exists (GPLVM -> PCA); most names have none worth listing.
#: EX01 "Examples" section: each estimator and kernel class carries a runnable
#:      example of its whole use; methods and helpers are shown in it.
#: ES01 extended summary: optional in the numpydoc standard; a one-line
#:      summary is the whole story for many accessors.
IGNORED = {"SA01", "EX01", "ES01"}

#: Names whose docstrings live in modules this test cannot fix on its own
#: schedule, with the checks still failing there (to be emptied, not grown).
KNOWN = {}


def _public_names():
    names = []
    for estimator in ("GaussianProcessRegressor", "GPLVM"):
        names.append(f"fastgp.{estimator}")
        cls = getattr(fastgp, estimator)
        names += [f"fastgp.{estimator}.{name}" for name, value in vars(cls).items()
                  if not name.startswith("_") and callable(value)]
    names += [f"fastgp.kernels.{name}" for name in fastgp.kernels.__all__]
    names += [f"fastgp.memory.{name}" for name in fastgp.memory.__all__
              if callable(getattr(fastgp.memory, name))]
    names += [f"fastgp.datasets.{name}" for name in fastgp.datasets.__all__]
    names += [f"fastgp.exceptions.{name}" for name in fastgp.exceptions.__all__]
    return names


def test_docstrings_cover_the_public_api():
    names = _public_names()
    for expected in ("fastgp.GaussianProcessRegressor.fit", "fastgp.GPLVM.transform",
                     "fastgp.kernels.RationalQuadratic", "fastgp.memory.check_memory",
                     "fastgp.datasets.load_mauna_loa_co2"):
        assert expected in names


@pytest.mark.parametrize("name", _public_names())
def test_docstrings_pass_numpydoc_validation(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpydoc warns on an unknown section
        result = numpydoc_validate.validate(name)
    allowed = IGNORED | KNOWN.get(name, set())
    errors = [f"{code}: {message}" for code, message in result["errors"]
              if code not in allowed]
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("estimator", [fastgp.GaussianProcessRegressor(), fastgp.GPLVM()],
                         ids=type)
def test_docstrings_html_repr_emits_no_warning(estimator):
    from sklearn.utils import estimator_html_repr

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        html = estimator_html_repr(estimator)
    assert type(estimator).__name__ in html
