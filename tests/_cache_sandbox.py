"""A private copy of fastgp, and child processes in which each of Numba's
cache locations is writable, read-only or unusable, for the cache tests.

Numba looks in three places (fastgp/_engine/config.py): NUMBA_CACHE_DIR, the
in-tree ``__pycache__`` beside the sources, and the user-wide directory
(``$XDG_CACHE_HOME/numba``, else ``~/.cache/numba``). A location is made
unusable in a way that holds for root too, whom file permissions do not stop:
its path runs below a regular file, or, in-tree, a regular file named
``__pycache__`` takes the directory's place. Nothing leaks into the real
user-wide cache: every child gets its own XDG_CACHE_HOME and HOME.
"""

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fastgp


class Sandbox:
    """A copy of the fastgp package under ``root/site`` (without any cache),
    and the paths that its child processes' cache locations point at."""

    def __init__(self, root):
        self.root = Path(root)
        self.site = self.root / "site"
        shutil.copytree(Path(fastgp.__file__).parent, self.site / "fastgp",
                        ignore=shutil.ignore_patterns("__pycache__"))
        self.engine = self.site / "fastgp" / "_engine"
        self.in_tree = self.engine / "__pycache__"
        self.numba_cache_dir = self.root / "numba-cache-dir"
        self.xdg_cache_home = self.root / "xdg-cache"
        self.user_wide = self.xdg_cache_home / "numba"
        self.regular_file = self.root / "a-regular-file"
        self.regular_file.write_text("a cache directory cannot be created below a file\n")

    def block_in_tree(self):
        """A regular file named ``__pycache__`` beside the engine's sources:
        the in-tree cache directory can neither exist nor be created."""
        self.in_tree.write_text("")

    def env(self, numba_cache_dir="unset", user_wide="writable"):
        """The environment of a child: NUMBA_CACHE_DIR "unset", "writable" or
        "unusable"; the user-wide directory "writable" or "unusable"."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
        env["PYTHONPATH"] = str(self.site)
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # only Numba writes into __pycache__
        if numba_cache_dir == "writable":
            env["NUMBA_CACHE_DIR"] = str(self.numba_cache_dir)
        elif numba_cache_dir == "unusable":
            env["NUMBA_CACHE_DIR"] = str(self.regular_file / "numba-cache-dir")
        else:
            assert numba_cache_dir == "unset", numba_cache_dir
        home = self.root if user_wide == "writable" else self.regular_file
        assert user_wide in ("writable", "unusable"), user_wide
        env["XDG_CACHE_HOME"] = str(home / "xdg-cache")
        env["HOME"] = str(home / "home")
        return env

    def run(self, args, *, check=True, **env_options):
        """Run ``python *args`` in a child with :meth:`env`; return the process."""
        proc = subprocess.run([sys.executable, *args], env=self.env(**env_options),
                              cwd=self.root, capture_output=True, text=True, timeout=900)
        if check and proc.returncode != 0:
            raise AssertionError(f"child failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
        return proc

    def run_script(self, script, *args, **env_options):
        """Run a ``-c`` script that prints one JSON object last; return it."""
        proc = self.run(["-c", script, *args], **env_options)
        report = json.loads(proc.stdout.strip().splitlines()[-1])
        assert Path(report["fastgp"]).is_relative_to(self.site), report["fastgp"]
        return report

    def cache_files(self, where=None):
        """Numba's index (.nbi) and data (.nbc) files under *where* (default:
        the whole sandbox), as sorted relative paths."""
        where = self.root if where is None else Path(where)
        if not where.is_dir():
            return []
        return sorted(str(p.relative_to(where)) for p in where.rglob("*")
                      if p.suffix in (".nbi", ".nbc"))


@contextlib.contextmanager
def read_only(directory):
    """*directory* cannot be written while the block runs, by root too: the
    immutable attribute (``chattr +i``) for root, whom permissions do not
    stop, and the write bits for anyone else."""
    directory = Path(directory)
    if os.geteuid() == 0:
        try:
            subprocess.run(["chattr", "+i", str(directory)], check=True,
                           capture_output=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            pytest.skip(f"cannot make a directory read-only for root here: {exc}")
        undo = lambda: subprocess.run(["chattr", "-i", str(directory)], check=True)
    else:
        mode = directory.stat().st_mode
        directory.chmod(mode & ~0o222)
        undo = lambda: directory.chmod(mode)
    try:
        with pytest.raises(OSError):
            (directory / "probe").touch()
        yield directory
    finally:
        undo()
