"""``python -m executor`` is the ``executor`` command."""

import sys

from executor.main import main

# Guarded: a spawned worker process (the shadow signer's) re-imports the main module.
if __name__ == "__main__":
    sys.exit(main())
