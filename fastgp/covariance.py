"""Deprecated: :class:`~fastgp.exceptions.SlowKernelWarning` lives in
:mod:`fastgp.exceptions`; importing it from here still works, with a
DeprecationWarning."""

from ._moved import moved_names

__getattr__ = moved_names(__name__, {"SlowKernelWarning": "fastgp.exceptions"})
