"""CI: the built wheel holds the whole package. Build fastgp's wheel, install
it (without dependencies, which the calling environment has) into an empty
directory, check that it holds every module of the source tree, import each
from there, not from the source tree, and read the data the package ships.

    python .ci/check_wheel.py DIRECTORY   # DIRECTORY: scratch space, emptied
"""

import importlib
import pathlib
import pkgutil
import shutil
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent


def main(scratch):
    scratch = pathlib.Path(scratch).resolve()
    shutil.rmtree(scratch, ignore_errors=True)
    wheels, site = scratch / "wheels", scratch / "site"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--wheel-dir", str(wheels), str(REPO)], check=True)
    wheel, = wheels.glob("fastgp-*.whl")
    # every module of the source tree, so that a folder the wheel left out
    # fails here even where nothing imports it
    source = sorted(
        ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        for path in (REPO / "fastgp").rglob("*.py") if path.name != "__main__.py")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--target", str(site), str(wheel)], check=True)
    code = f"""
import importlib, pkgutil, sys
sys.path.insert(0, {str(site)!r})
import fastgp
assert fastgp.__file__.startswith({str(site)!r}), fastgp.__file__
names = [m.name for m in pkgutil.walk_packages(fastgp.__path__, "fastgp.")
         if not m.name.endswith("__main__")]  # __main__ runs the main job
missing = sorted(set({source!r}) - set(names) - {{"fastgp"}})
assert not missing, f"the wheel lacks {{missing}}"
for name in names:
    importlib.import_module(name)
from fastgp.datasets import load_mauna_loa_co2, load_seattle_temperatures
load_mauna_loa_co2(); load_seattle_temperatures()
print(f"the wheel {wheel.name!r} imports all {{len(names) + 1}} modules of fastgp")
"""
    # from the scratch directory, so that the source tree is not on sys.path
    subprocess.run([sys.executable, "-c", code], check=True, cwd=scratch)


if __name__ == "__main__":
    main(sys.argv[1])
