"""The parts of ``fastgp fit`` (fastgp.cli): reading a CSV file's numeric
columns (``table.py``) and the fit of a user's data, its default kernel,
scores and outputs (``fit.py``). Nothing here is imported by ``import
fastgp``."""
