"""Backends for the Laplace objective's failure tests, shared by the test
modules that need them."""

import numpy as np


class NegativeDefinite:
    """A backend whose K is -50 I (plus diag_add): B = I + W^1/2 K W^1/2 is
    not positive definite, so the objective must answer inf."""

    is_fast = False

    def __init__(self, n):
        self.n = n

    def fill_lower(self, theta, diag_add, K_out):
        K_out[...] = -50.0 * np.eye(self.n) + diag_add
