"""fastgp/_linalg"""
