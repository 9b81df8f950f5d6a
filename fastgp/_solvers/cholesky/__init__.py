"""fastgp/_solvers/cholesky"""
