"""The fixed signatures of the routines that the engine calls through its
address table (:mod:`.address_call`): the interpreter and the leaves. Each
is compiled for exactly these Numba types, and every call site is checked
against them when its caller compiles.

The arrays are writeable and C-contiguous, the integers int64: the types the
passes hold (fastgp._backend.covariance.kernel_input makes every input so).
"""

from numba import types

from .address_call import TABLE_TYPE

__all__ = ["EVAL_TILE_SIGNATURE", "LEAF_SIGNATURE"]

_F1 = types.Array(types.float64, 1, "C")
_F2 = types.Array(types.float64, 2, "C")
_F3 = types.Array(types.float64, 3, "C")
_I1 = types.Array(types.int64, 1, "C")
_I2 = types.Array(types.int64, 2, "C")
_I = types.int64
_B = types.boolean

#: interpreter.eval_tile(engine, X1, i0, n, X2, j, diag_t, ops, op_float,
#: params, theta_of_param, mode, V, G, D1, D2, Wk) -> final stack depth.
EVAL_TILE_SIGNATURE = types.int64(TABLE_TYPE, _F2, _I, _I, _F2, _I, _I, _I2, _F1, _F1,
                                  _I1, _I, _F2, _F2, _F3, _F3, _F2)

#: Every leaf entry of .leaves: (engine, X1, i0, n, X2, j, diag_t, ops, o,
#: params, theta_of_param, want_theta, want_x1, want_x2, V, s, G, D1, D2, Wk).
LEAF_SIGNATURE = types.none(TABLE_TYPE, _F2, _I, _I, _F2, _I, _I, _I2, _I, _F1, _I1,
                            _B, _B, _B, _F2, _I, _F2, _F3, _F3, _F2)
