"""What the public API's fuzz tests share: how a call's outcome is judged."""

import re
import warnings

import numpy as np

#: What the public API may raise (documented in docs/reliability.md).
DOCUMENTED = (ValueError,)


def expect(kind, pattern, func, *args, **kwargs):
    """Call func; an "invalid" call must raise a documented error matching
    pattern, others may raise only one that matches. Returns the result or
    None."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            try:
                result = func(*args, **kwargs)
            except DOCUMENTED as exc:
                assert re.search(pattern, str(exc)), (kind, pattern, str(exc))
                return None
    assert kind != "invalid", f"accepted invalid input (expected {pattern!r})"
    return result
