"""fastgp/_backend"""
