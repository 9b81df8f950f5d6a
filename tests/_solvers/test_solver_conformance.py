"""The Cholesky, matrix-free and Vecchia solvers answer the conformance
battery (tests/_conformance.py) against the dense NumPy reference."""

from _conformance import LowRankConformance, MeanConformance, SolverConformance
from fastgp._engine.interpreter import TILE


class TestCholeskySolver(SolverConformance, MeanConformance):
    name = "cholesky"
    memory_share = 0.75  # measured 0.97 at N = 1,500
    # measured 0.80 (covariance) and 0.46 (sample_y, whose SVD's LAPACK buffers
    # tracemalloc does not see)
    predict_memory_share = 0.4


class TestIterativeSolver(SolverConformance, MeanConformance, LowRankConformance):
    """Exact on these problems: a preconditioner of full rank makes P = K~, so
    the stochastic terms vanish and CG converges at once. At rank 4 the
    probes carry the estimate, which is unbiased (LowRankConformance)."""

    name = "iterative"
    params = dict(preconditioner_rank=40, cg_tol=1e-12, max_cg_iter=200)
    low_rank_params = dict(preconditioner_rank=4, cg_tol=1e-12, max_cg_iter=200)
    # above the tile, still of full rank, so still exact: the Matern cases'
    # spectra decay slowly, so a lower rank would leave their probe terms
    # (at rank 4 and N = 40 the gradient spreads by up to 18 % of its
    # largest component over probe sets). The factor costs O(N k^2) and the
    # gradient's pass k columns beside the probes', so N is one tile and a
    # short second (601): seconds per case, threaded and over two tiles
    above_tile_n = TILE + 89
    above_tile_params = dict(preconditioner_rank=TILE + 89, cg_tol=1e-12, max_cg_iter=200)
    rtol_value = 1e-9
    rtol_grad = 1e-6
    rtol_predict = 1e-7
    memory_n = 8000
    memory_share = 0.6  # measured 0.75 at N = 8,000 (0.50 at 2,000)
    predict_memory_share = 0.5  # measured 0.68 (covariance and sample_y)


class TestVecchiaSolver(SolverConformance, MeanConformance):
    """Exact on these problems: with every earlier point a neighbour
    (n_neighbors = N - 1) the product of the conditionals is the likelihood,
    and a query point conditioned on every training point is the exact GP's
    prediction."""

    name = "vecchia"
    params = dict(n_neighbors=39, n_neighbors_predict=40)
    # above the tile N - 1 neighbours would cost O(N^4); on inputs in
    # clusters of at most 100 points whose kernel between clusters is zero
    # (K~ block diagonal), 99 neighbours hold every earlier point of a
    # point's cluster and 100 every training point of a query's: exact again
    above_tile_cluster_size = 100
    above_tile_params = dict(n_neighbors=99, n_neighbors_predict=100)
    rtol_value = 1e-10
    rtol_grad = 1e-8
    rtol_predict = 1e-8
    memory_n = 8000
    memory_share = 0.3  # measured 0.37 at N = 8,000
    predict_memory_share = 0.7  # measured 0.95 (covariance and sample_y)
