"""Fixtures of the faithful interpreter's tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reciprocals import partial_reciprocal_table  # noqa: E402


@pytest.fixture
def partial_reciprocals(monkeypatch):
    """sm90's division with :func:`reciprocals.partial_reciprocal_table`: the brackets of an unknown
    reciprocal, wired through the interpreter and the checks (the shipped table knows every mantissa)."""
    from fp8check.triton import nvidia_approx as na

    table = partial_reciprocal_table()
    monkeypatch.setattr(na, "reciprocal_table", lambda: table)
    return table
