"""pytest-benchmark suites of fastgp's hot paths (see conftest.py); a package
so that pytest imports them as ``bench.suites.*`` beside ``bench``'s helpers."""
