"""Every Python example in README.md and docs/*.md runs as written without a
warning.

The examples are the ```python fenced blocks. A page's blocks run in order in
one namespace, as a reader runs them one after the other (the quick start's
memory block refits the regressor its first block made), under
``warnings.simplefilter("error")``, so any warning, a ConvergenceWarning
included, fails the page. A block that cannot run here says why in an HTML
comment on the line above its fence, which neither GitHub nor the site
shows::

    <!-- no-test: needs a dask cluster (a scheduler at tcp://scheduler:8786) -->

The gallery (docs/examples/plot_*.py) is executed by the documentation build
instead (docs/conf.py).
"""

import math
import pathlib
import re
import warnings

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])

_FENCE = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
_NO_TEST = re.compile(r"<!--\s*no-test:(.*?)-->")
#: What an example would need to hide a warning from the reader (and from
#: this test's filter).
_SILENCING = re.compile(r"simplefilter|filterwarnings|catch_warnings")

#: Pages whose examples take more than ~10 s on a busy 2-core machine: a
#: 2,000-point regression and a 500-digit GPLVM (README.md, about 45 s; the
#: quick start's, with its refit, about 35 s), the GPLVM page's (about 20 s),
#: and loky's worker processes (cluster.md, about 20 s).
SLOW_PAGES = {"README.md", "gplvm.md", "quickstart.md", "cluster.md"}


def _blocks(path):
    """``(line, code, reason)`` for each ```python block of ``path``:
    ``line`` is the fence's line number, ``reason`` the no-test comment's
    text on the line above the fence (None when the block runs)."""
    text = path.read_text()
    found = []
    for match in _FENCE.finditer(text):
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = _NO_TEST.fullmatch(before.strip())
        reason = marker.group(1).strip() if marker else None
        found.append((text.count("\n", 0, match.start()) + 1, match.group(1), reason))
    return found


def _runnable(path):
    return [(line, code) for line, code, reason in _blocks(path) if reason is None]


def _page_param(path):
    marks = [pytest.mark.slow] if path.name in SLOW_PAGES else []
    return pytest.param(path, id=path.name, marks=marks)


RUNNABLE_PAGES = [path for path in PAGES if _runnable(path)]


@pytest.mark.parametrize("path", [_page_param(path) for path in RUNNABLE_PAGES])
def test_page_examples_run_without_a_warning(path, monkeypatch):
    # whether a fit counts as long (LongFitWarning) depends on the machine's
    # speed and load, not on the example: under pytest-xdist on 2 cores the
    # README's GPLVM measured 0.14 s per evaluation, quiet 0.07 s.
    # tests/_fit/test_long_fits.py checks the notice itself
    monkeypatch.setattr("fastgp._fit.clock.LONG_FIT_SECONDS", math.inf)
    namespace = {"__name__": "__main__"}
    for line, code in _runnable(path):
        where = f"{path.relative_to(ROOT)}:{line}"
        assert not _SILENCING.search(code), f"{where}: the example silences warnings"
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            exec(compile(code, where, "exec"), namespace)


def test_every_skipped_example_says_why():
    skipped = [(path.name, line, reason) for path in PAGES
               for line, _, reason in _blocks(path) if reason is not None]
    assert skipped, "no page marks an example no-test: is the marker still parsed?"
    for name, line, reason in skipped:
        assert len(reason.split()) >= 3, f"{name}:{line}: no-test without a reason"


def test_the_extraction_finds_the_documented_examples():
    # README.md's regression and GPLVM examples, and the GPLVM page's, run
    blocks = {path.name: _runnable(path) for path in PAGES}
    assert len(blocks["README.md"]) == 2
    assert any("GPLVM(" in code for _, code in blocks["gplvm.md"])
    assert {"README.md", "quickstart.md", "gplvm.md", "gpc.md"} <= {
        path.name for path in RUNNABLE_PAGES}
    assert SLOW_PAGES <= {path.name for path in RUNNABLE_PAGES}
