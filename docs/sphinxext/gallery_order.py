"""The order of the gallery's examples: the reader's path through fastgp
(a fit and its forecast, what it costs, the GPLVM, scikit-learn tooling,
uncertainty), not the alphabet. Examples not listed follow, by file name."""

import os

ORDER = [
    "plot_mauna_loa.py",
    "plot_memory_time.py",
    "plot_gplvm_digits.py",
    "plot_pipeline_grid_search.py",
    "plot_uncertainty.py",
    "plot_vecchia_heaton.py",
    "plot_iterative.py",
    "plot_cluster_iterative.py",
]


class ExampleOrder:
    """sphinx-gallery ``within_subsection_order`` key: built with the gallery's
    source folder, called with each example's file name."""

    def __init__(self, src_dir):
        self.src_dir = src_dir

    def __call__(self, filename):
        name = os.path.basename(filename)
        return (ORDER.index(name), "") if name in ORDER else (len(ORDER), name)
