"""Every command the docs give works from a fresh clone: no path from one
machine (an absolute path, a virtual environment's bin/), and every file,
glob or module it names exists in the repository."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])

#: A command: an indented code line or an inline code span that starts with
#: python, pytest or pip.
_COMMAND = re.compile(r"^(?: {4}|\t)((?:python|pytest|pip)\b.*)$"
                      r"|(?<!`)`((?:python|pytest|pip)\b[^`]*)`",  # not a fence's ```python
                      re.MULTILINE)


def _commands(path):
    text = path.read_text()
    fenced = re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.DOTALL)
    found = [line.strip() for block in fenced for line in block.splitlines()
             if re.match(r"\s*(python|pytest|pip)\b", line)]
    found += [a or b for a, b in _COMMAND.findall(text)]
    return [command.split("#")[0].strip() for command in found]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_docs_commands_work_from_a_fresh_clone(path):
    for command in _commands(path):
        for word in command.split():
            assert not word.startswith(("/", "~")), f"{path.name}: {command}"
            assert "venv/bin" not in word, f"{path.name}: {command}"
            if re.match(r"(tests|bench|docs)/\S+\.(py|md)$", word):
                assert list(ROOT.glob(word)), f"{path.name}: {word} does not exist"
        module = re.search(r"python -m ((?:bench|fastgp)[\w.]*)", command)
        if module and not module.group(1).split(".")[-1].isupper():  # bench.NAME: a placeholder
            parts = module.group(1).split(".")
            file = ROOT.joinpath(*parts)
            assert file.with_suffix(".py").exists() or (file / "__main__.py").exists(), \
                f"{path.name}: no module {module.group(1)}"


def test_docs_reliability_gives_the_test_command_from_the_repository_root():
    assert "python -m pytest tests/memory tests/estimators -q" in \
        (ROOT / "docs" / "reliability.md").read_text()


def test_docs_intersphinx_reads_local_inventories_and_the_web_only_when_asked(tmp_path):
    # CI builds the site offline with -W: an inventory fetched from the web
    # would fail the build there (docs/conf.py)
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_conf", ROOT / "docs" / "conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    sites = conf.INTERSPHINX_SITES
    assert set(sites) == {"sklearn", "numpy", "scipy"}
    assert conf.intersphinx_inventories(tmp_path, online=False) == {}
    (tmp_path / "_intersphinx").mkdir()
    (tmp_path / "_intersphinx" / "numpy.inv").write_bytes(b"")
    offline = conf.intersphinx_inventories(tmp_path, online=False)
    assert offline == {"numpy": (sites["numpy"], str(tmp_path / "_intersphinx" / "numpy.inv"))}
    online = conf.intersphinx_inventories(tmp_path, online=True)
    assert online["sklearn"] == (sites["sklearn"], None) and online["numpy"] == offline["numpy"]
    assert "sphinx.ext.intersphinx" in conf.extensions
