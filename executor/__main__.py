"""``python -m executor`` is the ``executor`` command."""

import sys

from executor.main import main

sys.exit(main())
