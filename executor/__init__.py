"""trio-executor: the order executor of a prediction-market trading system, on Trio."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("trio-executor")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
