"""Deprecated: fastgp's linear-algebra warning and errors live in
:mod:`fastgp.exceptions`; importing them from here still works, with a
DeprecationWarning."""

from ._moved import moved_names

__getattr__ = moved_names(__name__, {
    "JitterWarning": "fastgp.exceptions",
    "NotPositiveDefiniteError": "fastgp.exceptions",
    "NonFiniteMatrixError": "fastgp.exceptions",
})
