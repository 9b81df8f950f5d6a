"""The door to the engine's routines on points alone, without a kernel: the
maxmin ordering's loops (fastgp/_engine/maxmin.py), for Vecchia's orderings
(fastgp/_solvers/vecchia/ordering.py). Each takes the points transposed,
(d, n) float64 C-contiguous (:func:`fastgp._backend.covariance.kernel_input`).
"""

from .._engine.maxmin import (filter_update_pairs, maxmin_exact, maxmin_heap, sqdist_pairs,
                              symmetric_lists)

__all__ = ["maxmin_exact", "maxmin_heap", "sqdist_pairs", "filter_update_pairs",
           "symmetric_lists"]
