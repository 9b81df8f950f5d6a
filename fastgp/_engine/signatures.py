"""The fixed signatures of the routines that the engine calls through its
address table (:mod:`.address_call`): the interpreter, the leaves and
Vecchia's block workers (:mod:`.vecchia_workers`). Each is compiled for
exactly these Numba types, and every call site is checked against them when
its caller compiles.

The arrays are writeable and C-contiguous, the integers int64: the types the
passes hold (fastgp._backend.covariance.kernel_input makes every input so).
"""

from numba import types

from .address_call import TABLE_TYPE

__all__ = ["EVAL_TILE_SIGNATURE", "LEAF_SIGNATURE", "LIKELIHOOD_BLOCK_SIGNATURE",
           "WEIGHTS_BLOCK_SIGNATURE", "PREDICT_BLOCK_SIGNATURE"]

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

#: vecchia_workers._likelihood_block(table, X, Y, diag_add, perm, nbrs, ops,
#: op_float, params, theta_of_param, stack_depth, n_theta, packed, start, end,
#: out) -> rows whose block was not positive definite.
LIKELIHOOD_BLOCK_SIGNATURE = types.int64(TABLE_TYPE, _F2, _F2, _F1, _I1, _I2, _I2, _F1, _F1,
                                         _I1, _I, _I, _B, _I, _I, _F1)

#: vecchia_workers._weights_block(table, X, Y, diag_add, perm, nbrs, ops,
#: op_float, params, theta_of_param, stack_depth, packed, start, end, b_out,
#: v_out, r_out) -> the same count.
WEIGHTS_BLOCK_SIGNATURE = types.int64(TABLE_TYPE, _F2, _F2, _F1, _I1, _I2, _I2, _F1, _F1, _I1,
                                      _I, _B, _I, _I, _F2, _F1, _F2)

#: vecchia_workers._predict_block(table, X, Xq, Y, diag_add, nbrs, ops,
#: op_float, params, theta_of_param, stack_depth, packed, start, end,
#: mean_out, var_out) -> query points whose block was not positive definite.
PREDICT_BLOCK_SIGNATURE = types.int64(TABLE_TYPE, _F2, _F2, _F2, _F1, _I2, _I2, _F1, _F1, _I1,
                                      _I, _B, _I, _I, _F2, _F1)
