"""fastgp/_fit"""
