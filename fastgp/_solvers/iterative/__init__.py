"""fastgp/_solvers/iterative"""
