"""Operation codes of a lowered kernel program, shared by the lowering (Python)
and the interpreter (Numba). Plain integers, so Numba freezes them at compile
time. Leaves push one value on the stack; operators pop two (or one) and push
one. See :mod:`fastgp._backend.lowering` for the program layout and the registry that
maps kernel classes to these codes, :mod:`.leaves` for each leaf's formulas.
"""

# leaves
CONST = 0  # params: [constant_value]
WHITE = 1  # params: [noise_level]            (nonzero only on the training diagonal)
RBF = 2  # params: [l_1 .. l_m], m in {1, d}
MATERN12 = 3  # params: [l_1 .. l_m]
MATERN32 = 4  # params: [l_1 .. l_m]
MATERN52 = 5  # params: [l_1 .. l_m]
RQ = 6  # params: [alpha, l_1 .. l_m]
EXPSINE = 7  # params: [l, p]  scikit-learn's: sin(pi |x - x'| / p), Euclidean |.|
DOT = 8  # params: [sigma_0]
RQ_ARD = 9  # params: [alpha, l_1 .. l_m], m in {1, d}   (fastgp.kernels)
EXPSINE_ARD = 10  # params: [l_1 .. l_m, p_1 .. p_m2], m, m2 in {1, d}  (fastgp.kernels)

#: Every leaf opcode; each has values, theta- and input derivatives in .leaves.
LEAVES = (CONST, WHITE, RBF, MATERN12, MATERN32, MATERN52, RQ, EXPSINE, DOT,
          RQ_ARD, EXPSINE_ARD)
#: Leaves whose value is a function of the scaled squared distance r2 alone.
STATIONARY_R2_LEAVES = (RBF, MATERN12, MATERN32, MATERN52)
#: Leaves with k(x, x') != k(x - x'), for which d/dx' != -d/dx.
NON_STATIONARY_LEAVES = (DOT,)

# operators
SUM = 20
PRODUCT = 21
POW = 22  # exponent stored in the program's float column
OPERATORS = (SUM, PRODUCT, POW)

# columns of KernelProgram.ops
COL_CODE = 0
COL_PSTART = 1  # first index into the params vector (leaves)
COL_M = 2  # number of length scales (leaves): size of the length_scale slot
COL_T0 = 3  # subtree's free-theta range [T0, T1); TM splits a product's children
COL_TM = 4
COL_T1 = 5
COL_M2 = 6  # number of periods (EXPSINE_ARD): size of the periodicity slot
N_COLS = 7
