"""``python -m executor.fake``: the fake exchange as a command (``executor.fake.cli``)."""

import sys

from executor.fake.cli import main

sys.exit(main())
