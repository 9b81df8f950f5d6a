"""Does the GPLVM's 2-D embedding of scikit-learn's digits (1,797 x 64) separate the classes better than PCA's, by leave-one-out 1-nearest-neighbour error?

    python -m bench.bench_gplvm_digits                    # all 1,797 digits, 200 iterations
    python -m bench.bench_gplvm_digits --iterations 50    # shorter

Lawrence (2005) shows the GPLVM's latent space keeping classes apart where
PCA's overlaps. The yardstick: in the 2-D embedding, classify each digit by its
nearest other digit (leave-one-out 1-NN) and count the errors. GPLVM: the
default model (``ConstantKernel * RBF(2 length scales) + WhiteKernel``, PCA
start, L-BFGS-B) with ``--iterations`` iterations; PCA: the first two
principal components. Also reported: the fit's time, iterations and final log
marginal likelihood, and the 1-NN error of held-out digits placed by
``transform`` (a stratified 80/20 split, fitted on the 80%) against PCA's on
the same split. Writes bench/results/gplvm_digits.json.
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import pairwise_distances
from sklearn.model_selection import train_test_split

from ._measure import REPO_ROOT, environment, write_json


def loo_1nn_error(Z, labels):
    """Leave-one-out 1-NN classification error of the rows of Z."""
    D = pairwise_distances(Z)
    np.fill_diagonal(D, np.inf)
    return float(np.mean(labels[D.argmin(axis=1)] != labels))


def held_out_1nn_error(Z_train, labels_train, Z_test, labels_test):
    nearest = pairwise_distances(Z_test, Z_train).argmin(axis=1)
    return float(np.mean(labels_train[nearest] != labels_test))


def fit(Y, iterations):
    from fastgp import GPLVM

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        start = time.perf_counter()
        gplvm = GPLVM(n_components=2, max_iter=iterations, random_state=0).fit(Y)
        wall = time.perf_counter() - start
    return gplvm, {"wall_s": wall, "n_iter": gplvm.n_iter_,
                   "n_evaluations": gplvm.n_evaluations_,
                   "log_marginal_likelihood": gplvm.log_marginal_likelihood_value_,
                   "kernel": repr(gplvm.kernel_),
                   "warnings": [str(w.message)[:200] for w in caught]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--out", default=str(REPO_ROOT / "bench" / "results"
                                             / "gplvm_digits.json"))
    args = parser.parse_args(argv)
    Y, labels = load_digits(return_X_y=True)

    gplvm, info = fit(Y, args.iterations)
    full = {"n": len(Y), "pca_loo_1nn_error": loo_1nn_error(PCA(2).fit_transform(Y), labels),
            "gplvm_loo_1nn_error": loo_1nn_error(gplvm.embedding_, labels), "fit": info}
    print(f"all {len(Y)} digits: leave-one-out 1-NN error in 2-D: GPLVM "
          f"{full['gplvm_loo_1nn_error']:.3f}, PCA {full['pca_loo_1nn_error']:.3f} "
          f"({info['n_iter']} iterations, {info['wall_s']:.0f} s, kernel {info['kernel']})",
          flush=True)

    Y_tr, Y_te, l_tr, l_te = train_test_split(Y, labels, test_size=0.2, stratify=labels,
                                              random_state=0)
    gplvm, info_split = fit(Y_tr, args.iterations)
    start = time.perf_counter()
    Z_te = gplvm.transform(Y_te)
    transform_s = time.perf_counter() - start
    pca = PCA(2).fit(Y_tr)
    split = {"n_train": len(Y_tr), "n_test": len(Y_te), "fit": info_split,
             "transform_s": transform_s,
             "gplvm_held_out_1nn_error": held_out_1nn_error(gplvm.embedding_, l_tr, Z_te, l_te),
             "pca_held_out_1nn_error": held_out_1nn_error(pca.transform(Y_tr), l_tr,
                                                          pca.transform(Y_te), l_te)}
    print(f"80/20 split: held-out digits placed by transform ({transform_s:.1f} s), "
          f"1-NN error GPLVM {split['gplvm_held_out_1nn_error']:.3f}, PCA "
          f"{split['pca_held_out_1nn_error']:.3f}")
    write_json(args.out, {"question": __doc__.splitlines()[0],
                          "iterations": args.iterations, "all": full, "split": split,
                          "environment": environment()})
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
