"""argparse types shared by the examples: a bad value gets argparse's one-line error
(``error: argument --X: must be ...``, exit 2) before any JAX work, not a traceback or
numbers for a mechanism that does not exist."""

from __future__ import annotations

import argparse
import math


def _real(text: str, ok, what: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and ok(v)):
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
    return v


def positive(text: str) -> float:
    """A positive and finite float."""
    return _real(text, lambda v: v > 0, "positive and finite")


def nonnegative(text: str) -> float:
    """A non-negative and finite float."""
    return _real(text, lambda v: v >= 0, "non-negative and finite")


def finite(text: str) -> float:
    """A finite float."""
    return _real(text, lambda v: True, "finite")


def count(text: str) -> int:
    """A positive integer."""
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return v
