"""``python -m fastgp``: see :mod:`fastgp.cli`."""

import sys

from .cli import main

sys.exit(main())
