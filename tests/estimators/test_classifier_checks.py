"""scikit-learn's estimator checks for fastgp's classifier: the API contract
(parameters, fitted attributes, input validation, pickling, dtypes, classes
of any type, sample order invariance ...) that makes it a drop-in
replacement for scikit-learn's GaussianProcessClassifier."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from fastgp import GaussianProcessClassifier


@parametrize_with_checks([GaussianProcessClassifier()])
def test_sklearn_estimator_checks_classifier(estimator, check):
    check(estimator)


def test_classifier_docstrings_pass_numpydoc_validation():
    """The classifier's own docstrings (the class, fit, and the memory
    estimate) pass numpydoc's validation with the project's exceptions
    (tests/project/test_docstrings.py), and its HTML repr emits no warning."""
    import warnings

    from numpydoc import validate as numpydoc_validate
    from sklearn.utils import estimator_html_repr

    ignored = {"SA01", "EX01", "ES01"}
    methods = ("fit", "predict", "predict_proba", "latent_mean_and_variance",
               "log_marginal_likelihood")
    for name in ("fastgp.GaussianProcessClassifier", "fastgp.memory.laplace_fit_bytes",
                 *(f"fastgp.GaussianProcessClassifier.{m}" for m in methods)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            result = numpydoc_validate.validate(name)
        errors = [f"{code}: {message}" for code, message in result["errors"]
                  if code not in ignored]
        assert not errors, (name, errors)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "GaussianProcessClassifier" in estimator_html_repr(GaussianProcessClassifier())
