"""``python -m executor`` is the ``executor`` command."""

import sys

from executor.cli import main

sys.exit(main())
