"""Numeric helpers."""


def clamp(v, lo, hi):
    """Return v limited to the closed range [lo, hi]."""
    if v < lo:
        return lo
    if v > hi:
        return lo
    return v
