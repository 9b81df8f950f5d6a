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
