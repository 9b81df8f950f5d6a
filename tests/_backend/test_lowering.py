"""Lowering of scikit-learn kernel trees into flat programs (fastgp._backend.lowering)."""

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import (
    RBF,
    CompoundKernel,
    Matern,
    PairwiseKernel,
    RationalQuadratic,
    WhiteKernel,
)
from sklearn.gaussian_process.kernels import ConstantKernel as C

from conftest import KERNELS, N_FEATURES, kernel_params, random_theta
from fastgp._engine import opcodes as op
from fastgp._backend.lowering import KernelProgram, lower_kernel


@pytest.mark.parametrize("kernel", kernel_params())
def test_lower_kernel_counts_free_hyperparameters(kernel):
    program = lower_kernel(kernel, N_FEATURES)
    assert isinstance(program, KernelProgram)
    assert program.n_theta == kernel.n_dims
    assert program.n_features == N_FEATURES
    assert program.ops.shape[1] == op.N_COLS
    assert program.base_params.shape == program.theta_of_param.shape
    # each free theta is read by exactly one parameter slot
    free = program.theta_of_param[program.theta_of_param >= 0]
    np.testing.assert_array_equal(np.sort(free), np.arange(kernel.n_dims))


def _natural_values(kernel):
    """Every hyperparameter value (free and fixed) of ``kernel``, read from
    scikit-learn's own ``get_params`` (the reference, not fastgp's lowering)."""
    params = kernel.get_params()
    return np.concatenate([np.atleast_1d(np.asarray(params[h.name], dtype=float)).ravel()
                           for h in kernel.hyperparameters])


def _same_values(a, b):
    """Every value of ``a`` is some value of ``b`` and the other way round."""
    close = np.isclose(a[:, None], b[None, :], rtol=1e-14, atol=0.0)
    return close.any(axis=1).all() and close.any(axis=0).all()


@pytest.mark.parametrize("kernel", kernel_params())
def test_lowering_params_follow_kernel_theta_order(kernel, rng):
    """program.params(theta) at a random theta holds the natural parameters
    of kernel.clone_with_theta(theta) as scikit-learn reports them: each free
    slot is exp of the theta component it names, fixed slots keep their
    values, and the program holds exactly the kernel's values."""
    program = lower_kernel(kernel, N_FEATURES)
    theta = random_theta(kernel, rng)
    params = program.params(theta)
    free = program.theta_of_param >= 0
    np.testing.assert_allclose(params[free], np.exp(theta[program.theta_of_param[free]]),
                               rtol=1e-14)
    assert _same_values(params, _natural_values(kernel.clone_with_theta(theta)))
    assert _same_values(program.params(kernel.theta), _natural_values(kernel))
    np.testing.assert_array_equal(params[~free], program.base_params[~free])


def test_lowering_nested_fixed_parts_map_each_theta_to_its_parameter():
    """A hand-checked nested expression: theta is (log c, log l1, log l2,
    log l_rq, log noise); RQ's alpha and the second constant are fixed."""
    kernel = (C(2.0) * RBF([0.5, 3.0])
              + C(0.3, "fixed") * RationalQuadratic(1.5, alpha=4.0, alpha_bounds="fixed")
              + WhiteKernel(0.01))
    program = lower_kernel(kernel, 2)
    np.testing.assert_allclose(kernel.theta, np.log([2.0, 0.5, 3.0, 1.5, 0.01]))
    theta = np.log([5.0, 7.0, 11.0, 17.0, 13.0])
    params = program.params(theta)
    by_value = dict(zip(np.round(params, 12), program.theta_of_param))
    assert by_value[5.0] == 0 and by_value[7.0] == 1 and by_value[11.0] == 2
    assert by_value[17.0] == 3 and by_value[13.0] == 4
    assert by_value[0.3] == -1 and by_value[4.0] == -1
    assert sorted(np.round(params, 12)) == sorted([5.0, 7.0, 11.0, 0.3, 4.0, 17.0, 13.0])


def test_lowering_params_rejects_wrong_theta_length():
    program = lower_kernel(C(1.0) * RBF(1.0), 1)
    with pytest.raises(ValueError, match="2 free hyperparameters"):
        program.params(np.zeros(3))


def test_lowering_stack_depth_is_the_tree_depth():
    assert lower_kernel(RBF(1.0), 1).stack_depth == 1
    assert lower_kernel(RBF(1.0) + WhiteKernel(), 1).stack_depth == 2
    # right-nested sums hold three values at once
    assert lower_kernel(RBF(1.0) + (RBF(2.0) + WhiteKernel()), 1).stack_depth == 3


class _MyRBF(RBF):
    """A user's subclass: may override __call__, so it must not be lowered."""


@pytest.mark.parametrize(
    "kernel",
    [
        pytest.param(Matern(1.0, nu=2.0), id="Matern-nu2"),
        pytest.param(C(1.0) * Matern(1.0, nu=0.7) + WhiteKernel(), id="nested-Matern-nu0.7"),
        pytest.param(PairwiseKernel(metric="laplacian"), id="Pairwise"),
        pytest.param(_MyRBF(1.0), id="subclass"),
        pytest.param(RBF(1.0) + _MyRBF(1.0), id="sum-with-subclass"),
        pytest.param(CompoundKernel([RBF(1.0), RBF(2.0)]), id="Compound"),
    ],
)
def test_lower_kernel_returns_none_off_the_fast_path(kernel):
    assert lower_kernel(kernel, N_FEATURES) is None


@pytest.mark.parametrize("kernel", [RBF([1.0, 2.0, 3.0]), Matern([1.0, 2.0, 3.0], nu=1.5),
                                    C(1.0) * RBF([1.0, 2.0, 3.0]) + WhiteKernel()])
def test_lowering_anisotropic_length_mismatch_raises_sklearns_error(kernel):
    X = np.zeros((4, 2))
    with pytest.raises(ValueError) as sklearn_error:
        kernel(X)
    with pytest.raises(ValueError) as fastgp_error:
        lower_kernel(kernel, 2)
    assert str(fastgp_error.value) == str(sklearn_error.value)
    assert "Anisotropic kernel must have the same number of dimensions" in str(
        fastgp_error.value)


def test_lowering_rational_quadratic_anisotropic_raises_like_sklearn():
    kernel = RationalQuadratic(length_scale=[1.0, 2.0])
    with pytest.raises(AttributeError, match="only supports isotropic"):
        kernel(np.zeros((3, 2)))
    with pytest.raises(AttributeError, match="only supports isotropic"):
        lower_kernel(kernel, 2)


def test_lowering_isotropic_length_scale_as_length_one_array():
    program = lower_kernel(RBF([0.7]), 3)
    assert program.n_theta == 1
    assert program.ops[0, op.COL_M] == 1


@pytest.mark.parametrize("name", ["RBF-ard", "Matern32-ard", "C*RBF+White"])
def test_lowering_records_one_length_scale_per_dimension(name):
    kernel = KERNELS[name]
    program = lower_kernel(kernel, N_FEATURES)
    leaves = program.ops[program.ops[:, op.COL_CODE] < op.SUM]
    assert N_FEATURES in leaves[:, op.COL_M]


# ------------------------------------------------------------ the registry
def test_registry_covers_every_leaf_opcode_and_lowers_to_its_own():
    from fastgp._backend.lowering import FAST_PATH_KERNELS

    registered = set()
    for kernel_type, entry in FAST_PATH_KERNELS.items():
        assert entry.kernel_type is kernel_type
        registered.update(entry.opcodes)
    assert registered == set(op.LEAVES)
    for kernel in KERNELS.values():
        program = lower_kernel(kernel, N_FEATURES)
        leaves = [c for c in program.ops[:, op.COL_CODE] if c not in op.OPERATORS]
        assert set(leaves) <= set(op.LEAVES)


def test_registry_names_every_kernel_in_messages_and_docs():
    from pathlib import Path

    from fastgp._backend.lowering import FAST_PATH_KERNELS, fast_path_summary

    summary = fast_path_summary()
    doc = (Path(__file__).parents[2] / "docs" / "adding_a_kernel.md").read_text()
    for entry in FAST_PATH_KERNELS.values():
        assert entry.name in summary
        assert f"`{entry.kernel_type.__name__}" in doc


def test_register_leaf_refuses_an_opcode_the_engine_does_not_know():
    from fastgp._backend.lowering import register_leaf

    class MyKernel(RBF):
        pass

    with pytest.raises(ValueError, match="not leaves of fastgp's engine"):
        register_leaf(MyKernel, lambda kernel, n_features: None, 99)


def test_messages_list_the_registry(rng):
    from fastgp._backend.covariance import make_covariance
    from fastgp.exceptions import SlowKernelWarning
    from fastgp._solvers.latent_density import lower_latent_kernel
    from fastgp._backend.lowering import fast_path_summary

    kernel = PairwiseKernel()
    with pytest.warns(SlowKernelWarning) as record:
        make_covariance(kernel, rng.standard_normal((4, 2)))
    assert fast_path_summary() in str(record[0].message)
    with pytest.raises(ValueError) as error:
        lower_latent_kernel(kernel, 2)
    assert fast_path_summary() in str(error.value)
