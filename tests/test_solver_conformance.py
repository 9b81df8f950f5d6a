"""The Cholesky and matrix-free solvers answer the conformance battery
(tests/_conformance.py) against the dense NumPy reference."""

from _conformance import SolverConformance


class TestCholeskySolver(SolverConformance):
    name = "cholesky"
    memory_share = 0.75  # measured 0.97 at N = 1,500


class TestIterativeSolver(SolverConformance):
    """Exact on these problems: a preconditioner of full rank makes P = K~, so
    the stochastic terms vanish and CG converges at once."""

    name = "iterative"
    params = dict(preconditioner_rank=40, cg_tol=1e-12, max_cg_iter=200)
    rtol_value = 1e-9
    rtol_grad = 1e-6
    rtol_predict = 1e-7
    memory_n = 8000
    memory_share = 0.6  # measured 0.75 at N = 8,000 (0.50 at 2,000)


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
    memory_n = 8000
    memory_share = 0.3  # measured 0.45 at N = 8,000
