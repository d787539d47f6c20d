"""Gradcheck cases for the backward formulas of csrc/autograd/derivatives_reduce.c,
merged into tests/test_autograd_ops.py's tables."""
from autograd_common import ALL4, GC, S0, V4, X34, Y34, _calls, _ts, _vals  # noqa: F401

DB_KINDS = set()         # op_db kinds whose float64 samples become gradcheck cases
EXTRA = {}               # op -> [GC]: cases op_db's samples don't give
INPLACE_VIEW_EXTRA = []  # [GC]: in-place writes into views of non-leaves
GG = []                  # (id, fn, number of (2, 3) float64 inputs): gradgradcheck
