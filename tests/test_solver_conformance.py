"""The Cholesky and matrix-free solvers answer the conformance battery
(tests/_conformance.py) against the dense NumPy reference."""

from _conformance import SolverConformance


class TestCholeskySolver(SolverConformance):
    name = "cholesky"


class TestIterativeSolver(SolverConformance):
    """Exact on these problems: a preconditioner of full rank makes P = K~, so
    the stochastic terms vanish and CG converges at once."""

    name = "iterative"
    params = dict(preconditioner_rank=40, cg_tol=1e-12, max_cg_iter=200)
    rtol_value = 1e-9
    rtol_grad = 1e-6
    rtol_predict = 1e-7


class TestVecchiaSolver(SolverConformance):
    """Exact on these problems: with every earlier point a neighbour
    (n_neighbors = N - 1) the product of the conditionals is the likelihood,
    and a query point conditioned on every training point is the exact GP's
    prediction."""

    name = "vecchia"
    params = dict(n_neighbors=39, n_neighbors_predict=40)
    rtol_value = 1e-10
    rtol_grad = 1e-8
    rtol_predict = 1e-8
