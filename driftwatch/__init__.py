"""driftwatch: environment drift detector for remote GPU hosts."""

__version__ = "0.1.0"
