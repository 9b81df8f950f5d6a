"""The inputs as the engine's passes read them (docs/design.md, "Inputs in
column order")."""

import numpy as np

__all__ = ["kernel_input"]


def kernel_input(X):
    """Inputs X (n, d) as the jitted passes take them: transposed, (d, n),
    float64, C-contiguous, writeable. Each input dimension's values are then
    consecutive, so that the passes' loops over a tile of points read
    consecutive numbers and vectorise (docs/design.md, "Inputs in column
    order"); an F-contiguous X is not copied (its transpose is the result).

    Numba compiles (and caches) one specialisation per argument type, and a
    read-only array (a joblib memmap, ``writeable=False``, a broadcast view)
    or another memory layout is a different type: predicting on one compiled
    fill_cross_cov and eval_tile again, ~25 s on the 2-core CI machine. A
    (d, n) C-contiguous array is typed the same for every d (an (n, d)
    F-contiguous one would not be: NumPy flags (n, 1) as C-contiguous too).
    Copying an (n, d) input costs O(n d) and keeps one compiled
    specialisation per routine.
    """
    return np.require(np.asarray(X, dtype=np.float64).T, dtype=np.float64,
                      requirements=["C_CONTIGUOUS", "WRITEABLE"])
