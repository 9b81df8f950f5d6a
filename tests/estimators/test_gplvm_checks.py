"""scikit-learn's estimator checks for GPLVM."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from fastgp import GPLVM


@parametrize_with_checks([GPLVM(max_iter=100, random_state=0)])
def test_gplvm_sklearn_compatible(estimator, check):
    check(estimator)
