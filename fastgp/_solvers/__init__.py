"""fastgp/_solvers"""
