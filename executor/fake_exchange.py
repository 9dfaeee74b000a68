"""``python -m executor.fake_exchange``: the fake exchange's command under its first name.

Kept because scripts and notes written before the package had layers start the fake this way; the
fake itself lives in ``executor.fake``, and this module only runs its command.
"""

import sys

from executor.fake.cli import main

if __name__ == "__main__":
    sys.exit(main())
