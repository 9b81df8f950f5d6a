"""Operation codes of a lowered kernel program, shared by the lowering (Python)
and the interpreter (Numba). Plain integers, so Numba freezes them at compile
time. Leaves push one value on the stack; operators pop two (or one) and push
one. See :mod:`fastgp.lowering` for the program layout.
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

# operators
SUM = 20
PRODUCT = 21
POW = 22  # exponent stored in the program's float column

# columns of KernelProgram.ops
COL_CODE = 0
COL_PSTART = 1  # first index into the params vector (leaves)
COL_M = 2  # number of length scales (leaves): size of the length_scale slot
COL_T0 = 3  # subtree's free-theta range [T0, T1); TM splits a product's children
COL_TM = 4
COL_T1 = 5
COL_M2 = 6  # number of periods (EXPSINE_ARD): size of the periodicity slot
N_COLS = 7
