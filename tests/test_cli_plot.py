"""``python -m fastgp --plot FILE``: the Mauna Loa figure as PNG or PDF
(fastgp.cli, fastgp.plotting), and the message when matplotlib is missing."""

import sys

import pytest

from fastgp import cli

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name, magic", [("co2.png", PNG_MAGIC), ("co2.PDF", b"%PDF-")])
def test_plot_writes_a_valid_figure_by_extension(name, magic, tmp_path, capsys):
    pytest.importorskip("matplotlib")  # in the test extra; skipped only outside it
    path = tmp_path / name
    assert cli.main(["--n-samples", "60", "--quiet", "--plot", str(path)]) == 0
    data = path.read_bytes()
    assert data.startswith(magic)
    # axes, 60 points, a line, a band and text: far more than an empty file
    assert len(data) > 10_000
    if magic == b"%PDF-":
        assert data.rstrip().endswith(b"%%EOF")
    assert f"figure written to {path}" in capsys.readouterr().out


def _plot_fails_before_the_fit(path, capsys):
    """Run ``--plot path``; check it exits non-zero having fitted and written
    nothing, and return what it wrote to stderr."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--n-samples", "60", "--plot", str(path)])
    assert exit_info.value.code != 0
    captured = capsys.readouterr()
    assert "fitted kernel" not in captured.out
    assert not path.exists()
    return captured.err


def test_plot_without_matplotlib_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    # A None entry in sys.modules makes `import matplotlib` raise ImportError,
    # as on a machine without it.
    for module in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    err = _plot_fails_before_the_fit(tmp_path / "co2.png", capsys)
    assert "needs matplotlib" in err
    assert "pip install matplotlib" in err


def test_plot_with_an_unknown_extension_fails_before_the_fit(tmp_path, capsys):
    assert ".png or .pdf" in _plot_fails_before_the_fit(tmp_path / "co2.svgz", capsys)
