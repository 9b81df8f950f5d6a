"""Write fit_example.csv, the data set of ``fastgp fit``'s documented example:
80 rows of y = sin(x1) + 0.3 x2 + noise (standard deviation 0.1), with a
third input x3 that y does not depend on (its fitted length scale grows long).

    python tests/data/make_fit_example.py
"""

import pathlib

import numpy as np

N_ROWS = 80


def main():
    rng = np.random.default_rng(2024)
    x1 = rng.uniform(0.0, 10.0, N_ROWS)
    x2 = rng.uniform(0.0, 5.0, N_ROWS)
    x3 = rng.uniform(-1.0, 1.0, N_ROWS)
    y = np.sin(x1) + 0.3 * x2 + 0.1 * rng.standard_normal(N_ROWS)
    path = pathlib.Path(__file__).with_name("fit_example.csv")
    with path.open("w") as f:
        f.write("x1,x2,x3,y\n")
        for row in zip(x1, x2, x3, y):
            f.write(",".join(f"{v:.4f}" for v in row) + "\n")


if __name__ == "__main__":
    main()
