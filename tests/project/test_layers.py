"""The package's folders are its layers, and imports run one way
(docs/design.md, "The package"):

- numba only inside fastgp/_engine; the engine only from the backend
  (fastgp/_backend) and fastgp/precompile.py, except its thread governor
  (fastgp._engine.threads), which the fit core, the solvers and the workers
  of parallel restarts use, and its compile timer
  (fastgp._engine.compile_time), which the fit's clock uses;
- LAPACK and BLAS only inside fastgp/_linalg (on a GPU: nvmath-python's
  cuBLAS and cuSOLVER bindings only in fastgp/_linalg/cuda_tiles.py); the
  thread governor sets how many threads run its tiles and BLAS
  (fastgp._linalg.tiles and
  fastgp._linalg.blas_threads, which import nothing of fastgp) and sends
  OpenBLAS's spinning workers to sleep as a fit starts
  (fastgp._linalg.blas_pool, which imports those two only);
- the estimators never import the engine or LAPACK;
- no solver folder imports another (fastgp/_solvers/<name>/);
- each layer imports only the layers below it, and a top-level module only
  the private layers and the top-level modules before it in :data:`TOP`;
- no module takes part in an import cycle (function-level imports counted);
- scikit-learn's private names only through fastgp/_validation.py;
- docs/design.md's map of the package names every folder and module.
"""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "fastgp"
MODULES = sorted(PACKAGE.rglob("*.py"))
ESTIMATORS = {"regressor.py", "classifier.py", "gplvm.py"}
SOLVER_FOLDERS = sorted(p.name for p in (PACKAGE / "_solvers").iterdir()
                        if p.is_dir() and (p / "__init__.py").exists())

#: imported module -> the places (paths relative to fastgp/, a folder ends
#: in "/") allowed to import it; a name is judged by the most specific door
#: it lies behind.
DOORS = {
    "numba": {"_engine/"},
    "fastgp._engine": {"_engine/", "_backend/", "precompile.py"},
    "fastgp._engine.threads": {"_engine/", "_fit/", "_solvers/", "_optimize/workers.py"},
    "fastgp._engine.compile_time": {"_engine/", "_fit/clock.py"},
    "scipy.linalg.lapack": {"_linalg/"},
    "scipy.linalg.blas": {"_linalg/"},
    "scipy.linalg.cython_blas": {"_linalg/"},
    "scipy.linalg.cython_lapack": {"_linalg/"},
    "nvmath": {"_linalg/cuda_tiles.py"},
    "fastgp._linalg.blocked": {"_linalg/lapack.py"},
    "fastgp._linalg.tiles": {"_linalg/", "_engine/threads.py"},
    "fastgp._linalg.blas_threads": {"_linalg/", "_engine/threads.py"},
}

#: folder -> the fastgp modules (prefixes) it may import: the layers below.
BELOW = {
    "_engine/": {"fastgp._engine", "fastgp._linalg.tiles", "fastgp._linalg.blas_threads",
                 "fastgp._linalg.blas_pool", "fastgp.exceptions"},
    "_linalg/": {"fastgp._linalg", "fastgp.exceptions"},
    "memory/": {"fastgp.memory", "fastgp.exceptions", "fastgp._user_warnings"},
    "_backend/": {"fastgp._backend", "fastgp._engine", "fastgp.exceptions",
                  "fastgp._user_warnings"},
    "_solvers/": {"fastgp._solvers", "fastgp._backend", "fastgp._linalg", "fastgp._engine",
                  "fastgp.memory", "fastgp.exceptions", "fastgp._user_warnings",
                  "fastgp._validation"},
    "_optimize/": {"fastgp._optimize", "fastgp._engine.threads", "fastgp.memory",
                   "fastgp.exceptions", "fastgp._user_warnings"},
    "_fit/": {"fastgp._fit", "fastgp._optimize", "fastgp._solvers", "fastgp._backend",
              "fastgp._engine.threads", "fastgp._engine.compile_time", "fastgp.memory",
              "fastgp.exceptions", "fastgp._user_warnings", "fastgp._validation"},
}


#: The top-level modules (and the CLI's private folder), lowest first: each
#: may import the private layers (``fastgp._*`` folders, ``fastgp.memory``)
#: and the top-level modules before it, never one after it.
TOP = ["exceptions.py", "_user_warnings.py", "_validation.py", "_moved.py",
       "covariance.py", "linalg.py", "memory_budget.py", "datasets.py", "kernels.py",
       "regressor.py", "classifier.py", "gplvm.py", "plotting.py", "__init__.py",
       "precompile.py", "_cli/", "cli.py", "__main__.py"]


def _relative(path):
    return path.relative_to(PACKAGE).as_posix()


def _allowed(place, path):
    rel = _relative(path)
    return any(rel == p or (p.endswith("/") and rel.startswith(p)) for p in place)


def _imported_names(path):
    """Fully qualified names of every module (and from-imported name) that
    ``path`` imports, relative imports resolved against its package."""
    names = set()
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = parts[:-node.level]
                base = ".".join(package + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if node.module:  # `from . import x` imports x, not the package
                names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def _door_of(name):
    behind = [door for door in DOORS if name == door or name.startswith(door + ".")]
    return max(behind, key=len) if behind else None


def _under(name, prefix):
    return name == prefix or name.startswith(prefix + ".")


@pytest.mark.parametrize("path", MODULES, ids=_relative)
def test_layers_engine_and_lapack_only_through_their_doors(path):
    for name in sorted(_imported_names(path)):
        door = _door_of(name)
        if door is not None:
            assert _allowed(DOORS[door], path), (
                f"{_relative(path)} imports {name}; only {sorted(DOORS[door])} may")


@pytest.mark.parametrize("path", [p for p in MODULES if p.name in ESTIMATORS and
                                  p.parent == PACKAGE], ids=_relative)
def test_layers_estimators_never_import_the_engine_or_lapack(path):
    for name in _imported_names(path):
        assert not _under(name, "fastgp._engine"), f"{path.name} imports {name}"
        assert not _under(name, "fastgp._linalg"), f"{path.name} imports {name}"


@pytest.mark.parametrize("path", [p for p in MODULES if "_solvers" in p.parts
                                  and len(p.relative_to(PACKAGE / "_solvers").parts) > 1],
                         ids=_relative)
def test_layers_no_solver_folder_imports_another(path):
    own = path.relative_to(PACKAGE / "_solvers").parts[0]
    for name in _imported_names(path):
        for other in SOLVER_FOLDERS:
            if other != own:
                assert not _under(name, f"fastgp._solvers.{other}"), (
                    f"{_relative(path)} imports {name}: solver folders stay apart")


@pytest.mark.parametrize("path", [p for p in MODULES if any(
    _relative(p).startswith(folder) for folder in BELOW)], ids=_relative)
def test_layers_import_only_the_layers_below(path):
    folder = next(f for f in BELOW if _relative(path).startswith(f))
    for name in _imported_names(path):
        if _under(name, "fastgp"):
            assert any(_under(name, allowed) for allowed in BELOW[folder]), (
                f"{_relative(path)} imports {name}; {folder} may import only "
                f"{sorted(BELOW[folder])}")


def _top_level_name(entry):
    """The module name of a :data:`TOP` entry ("kernels.py" -> fastgp.kernels)."""
    stem = entry.removesuffix("/").removesuffix(".py")
    return "fastgp" if stem == "__init__" else f"fastgp.{stem}"


def _top_entry(path):
    rel = _relative(path)
    return next((e for e in TOP if rel == e or (e.endswith("/") and rel.startswith(e))),
                None)


@pytest.mark.parametrize("path", [p for p in MODULES if _top_entry(p)], ids=_relative)
def test_layers_top_level_modules_import_only_those_before_them(path):
    entry = _top_entry(path)
    later = [_top_level_name(e) for e in TOP[TOP.index(entry) + 1:]]
    for name in _imported_names(path):
        if name == "fastgp" or name.startswith("fastgp.__"):
            assert entry in ("precompile.py", "_cli/", "cli.py", "__main__.py"), (
                f"{_relative(path)} imports the package itself ({name})")
            continue
        for other in later:
            if other != "fastgp":
                assert not _under(name, other), (
                    f"{_relative(path)} imports {name}, a module above it in TOP")


def test_layers_every_top_level_module_has_a_place():
    top = {_relative(p) for p in MODULES if len(p.relative_to(PACKAGE).parts) == 1}
    assert top <= set(TOP), f"add {sorted(top - set(TOP))} to TOP"


def _module_of(name):
    """The file of module ``name`` or of the longest module prefix of it (a
    from-imported attribute), or None outside fastgp."""
    parts = name.split(".")
    while parts and parts[0] == "fastgp":
        base = PACKAGE.parent.joinpath(*parts)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.exists():
                return candidate
        parts = parts[:-1]
    return None


def test_layers_no_import_cycle():
    # every explicit import, function-level ones included (ast.walk), as an
    # edge between files; a package's implicit import of its parents is not
    # an edge (every module would then reach fastgp/__init__.py)
    graph = {path: {m for m in map(_module_of, _imported_names(path))
                    if m is not None and m != path} for path in MODULES}
    state = {}

    def visit(node, trail):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycle = trail[trail.index(nxt):] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(map(_relative, cycle)))
            if nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = "done"

    for path in MODULES:
        if path not in state:
            visit(path, [path])


@pytest.mark.parametrize("path", MODULES, ids=_relative)
def test_layers_scikit_learns_private_names_only_through_validation(path):
    if _relative(path) == "_validation.py":
        return
    for name in _imported_names(path):
        if _under(name, "sklearn"):
            private = [part for part in name.split(".")[1:] if part.startswith("_")]
            assert not private, (
                f"{_relative(path)} imports {name}: scikit-learn's private names go "
                "through fastgp/_validation.py")


def test_layers_modules_exist():
    # the scans above must see the package, not an empty directory
    names = {_relative(p) for p in MODULES}
    assert {"_backend/covariance.py", "_linalg/lapack.py", "_fit/session.py",
            "_optimize/minimize.py", "regressor.py", "gplvm.py",
            "_solvers/cholesky/objective.py", "_solvers/iterative/objective.py",
            "_solvers/base.py"} <= names
    assert {"cholesky", "iterative", "vecchia"} <= set(SOLVER_FOLDERS)


def _package_map():
    """docs/design.md's map of the package: {first column: whole row} of the
    table in its section "The package"."""
    text = (PACKAGE.parent / "docs" / "design.md").read_text()
    start = text.index("\n## The package\n")
    section = text[start:text.index("\n## ", start + 1)]
    return {row.split("|")[1]: row for row in section.splitlines() if row.startswith("| `")}


@pytest.mark.parametrize("path", MODULES, ids=_relative)
def test_layers_design_map_names_every_module(path):
    # the map is the folder list, complete: each folder has its row, and each
    # module is named in its folder's row (a top-level one in a first column)
    rows = _package_map()
    *folders, name = _relative(path).split("/")
    if not folders:
        assert any(f"`{name}`" in first for first in rows), (
            f"docs/design.md's map of the package does not name {name}")
        return
    folder = "/".join(folders) + "/"
    row = next((row for first, row in rows.items() if f"`{folder}`" in first), None)
    assert row is not None, f"docs/design.md's map of the package has no row for {folder}"
    assert name == "__init__.py" or f"`{name}`" in row, (
        f"docs/design.md's map of the package does not name {folder}{name} in {folder}'s row")
