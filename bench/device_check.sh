#!/usr/bin/env bash
# The GPU path's check on a machine with an NVIDIA GPU and no network
# (docs/gpu.md, "Checking a card"): installs the wheels carried in .devcheck/
# into a folder of their own, then runs bench.bench_device into $1 (default
# $OUT, else bench/results/device).
#
# Fill .devcheck/ where a network is, for the card machine's Python (3.12
# here) and what its image lacks, e.g.:
#
#   pip download nvmath-python==1.0.1 --no-deps --python-version 3.12 \
#       --only-binary=:all: --platform manylinux_2_28_x86_64 -d .devcheck
#
# numba-cuda 0.30 names np.row_stack, which NumPy 2.5 removed; where the
# image's NumPy is 2.5 or later and no NumPy 2.4 wheel is carried, a
# sitecustomize.py put beside the wheels gives np.row_stack back as
# np.vstack (the same function under its older name) for this run only.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:-${OUT:-bench/results/device}}
site=$(mktemp -d)
if compgen -G ".devcheck/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target "$site" .devcheck/*.whl
fi
cat > "$site/sitecustomize.py" <<'PY'
import numpy

if not hasattr(numpy, "row_stack"):
    numpy.row_stack = numpy.vstack
PY
export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
python3 -m bench.bench_device --out "$out" --budget "${BUDGET_S:-440}"
