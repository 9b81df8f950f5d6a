"""scikit-learn's estimator checks for fastgp's classifier: the API contract
(parameters, fitted attributes, input validation, pickling, dtypes, classes
of any type, sample order invariance ...) that makes it a drop-in
replacement for scikit-learn's GaussianProcessClassifier."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from fastgp import GaussianProcessClassifier


@parametrize_with_checks([GaussianProcessClassifier()])
def test_sklearn_estimator_checks_classifier(estimator, check):
    check(estimator)
