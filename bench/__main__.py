"""``python -m bench``: see ``bench.harness.cli``."""

import sys

from bench.harness.cli import main

sys.exit(main())
