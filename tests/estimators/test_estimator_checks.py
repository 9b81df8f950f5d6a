"""scikit-learn's estimator checks for fastgp's regressor: the API contract
(parameters, fitted attributes, input validation, pickling, dtypes, sample
order invariance ...) that makes it a drop-in replacement."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from fastgp import GaussianProcessRegressor


@parametrize_with_checks([GaussianProcessRegressor()])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
