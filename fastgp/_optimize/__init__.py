"""fastgp/_optimize"""
