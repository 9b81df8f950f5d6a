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


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_plot_marks_where_the_data_end_and_says_so(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    from fastgp.datasets import load_mauna_loa_co2

    drawn = []
    monkeypatch.setattr(cli, "save_figure", lambda figure, path: drawn.append(figure))
    assert cli.main(["--n-samples", "60", "--quiet", "--plot", str(tmp_path / "co2.png")]) == 0
    # the first 60 weeks end in 1959, not where the whole series does
    end = load_mauna_loa_co2()[0][:60].max()
    (ax,) = drawn[0].axes
    texts = [text.get_text() for text in ax.texts]
    assert f"data end: {end:.2f}" in texts and "forecast" in texts
    assert [line.get_xdata()[0] for line in ax.lines if line.get_linestyle() == "--"] == [end]
    out = capsys.readouterr().out
    assert f"the data end at {end:.2f} (decimal year); the rest, to 2025, is forecast" in out


def test_plot_forecast_marks_no_forecast_when_it_draws_none():
    pytest.importorskip("matplotlib")
    import numpy as np

    from fastgp import GaussianProcessRegressor
    from fastgp.plotting import plot_forecast

    X = np.linspace(2000.0, 2010.0, 30).reshape(-1, 1)
    y = np.sin(X[:, 0])
    gpr = GaussianProcessRegressor(optimizer=None).fit(X, y)
    texts = [t.get_text() for t in plot_forecast(gpr, X, y, until=2005.0,
                                                 n_points=50).axes[0].texts]
    assert texts == ["data end: 2010.00"]
