"""The engine table (fastgp._engine.address_call, interpreter.engine_table):
the passes call the interpreter, and the interpreter the leaves, through
addresses compiled for one fixed signature each. A call site with other
argument types must be refused when it compiles, and the table must hold the
leaves of the program it was made for. (The numbers through the table are
the parity tests' everywhere; tests/_engine/test_numba_cache.py checks what a fresh
install compiles.)"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numba
import numpy as np
import pytest
from numba.core.errors import TypingError
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp._engine import interpreter as it
from fastgp._engine import opcodes as op
from fastgp._engine.leaves import LEAF_SLOT
from fastgp._backend.covariance import kernel_input
from fastgp._backend.lowering import lower_kernel


def _tile_arguments(X_T, program, n_dims=0):
    scratch = it.allocate_scratch(program.stack_depth, program.n_theta, n_dims)
    return (X_T, np.int64(0), np.int64(X_T.shape[1]), X_T, np.int64(0), np.int64(0),
            program.ops, program.op_float, program.params(np.zeros(program.n_theta)),
            program.theta_of_param, np.int64(it.VALUES), *scratch)


def test_a_call_with_other_argument_types_is_refused_when_its_caller_compiles():
    @numba.njit
    def caller(engine, *args):
        return it.call_eval_tile(engine, *args)

    program = lower_kernel(RBF(1.0), 1)
    X_T = kernel_input(np.linspace(0.0, 1.0, 5)[:, None])
    good = _tile_arguments(X_T, program)
    assert caller(it.engine_table(program.ops), *good) == 1

    # the inputs as float32, and as a read-only array: other Numba types
    bad_dtype = (X_T.astype(np.float32),) + good[1:]
    read_only = X_T.copy()
    read_only.flags.writeable = False
    for args in (bad_dtype, (read_only,) + good[1:]):
        with pytest.raises(TypingError, match="compiled for"):
            caller(it.engine_table(program.ops), *args)


def test_the_table_holds_the_interpreter_and_the_programs_leaves_only():
    program = lower_kernel(C(1.0) * RBF(1.0) + WhiteKernel(0.1), 1)
    table = it.engine_table(program.ops)
    assert table.dtype == np.int64 and table.flags.c_contiguous and table.flags.writeable
    assert table[it.INTERPRETER_SLOT] != 0
    used = {op.CONST, op.RBF, op.WHITE}
    for code in op.LEAVES:
        assert (table[LEAF_SLOT + code] != 0) == (code in used), code
    every = it.engine_table()
    assert np.all(every != 0)
    assert np.array_equal(every[[LEAF_SLOT + c for c in used]],
                          table[[LEAF_SLOT + c for c in used]])
    assert it.engine_table(program.ops) is not table  # a new array per call



PURE_PYTHON_FILL = textwrap.dedent("""
    import mutation.pure_python  # before fastgp: njit returns Python functions
    import numpy as np
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C
    from fastgp._backend.covariance import make_covariance
    kernel = C(0.8) * RBF(0.6) + WhiteKernel(0.1)
    X = np.linspace(0.0, 1.0, 7)[:, None]
    cov = make_covariance(kernel, X)
    K = np.zeros((7, 7), order="F")
    cov.fill_lower(kernel.theta, np.zeros(7), K)
    lower = np.tril_indices(7)
    print(float(np.max(np.abs(K[lower] - kernel(X)[lower]))))
""")


def test_without_the_jit_the_table_calls_the_python_functions():
    """NUMBA_DISABLE_JIT=1 (the engine's mutation runs, docs/testing.md): the
    table holds handles and the calls go to the Python functions."""
    tests = Path(__file__).resolve().parents[1]
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1",
           "PYTHONPATH": os.pathsep.join([str(tests.parent), str(tests)])}
    proc = subprocess.run([sys.executable, "-c", PURE_PYTHON_FILL], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert float(proc.stdout.strip().splitlines()[-1]) < 1e-14
