"""Gradcheck cases for the nn functional ops' formulas (csrc/autograd/derivatives_nn.c),
merged into tests/test_autograd_ops.py's tables."""
import numpy as np

from autograd_common import ALL4, GC, X34, _calls, _ts, _vals
from op_db import TS

DB_KINDS = set()
W4 = _ts(_vals(("w4",), (4,)), lay=False)
B4 = _ts(_vals(("b4",), (4,)), lay=False)
EMB = _ts(_vals(("emb",), (5, 3)), lay=False)
IDX = TS(np.array([[0, 4, 4], [2, 0, 3]]), "int64", False, exact=True)


def usable(op, s, layout):
    """Veto op_db samples: embedding's padding_idx zeroes a gradient on purpose (not a
    derivative: tests/test_nn_embedding_dropout.py); torch names the node of a transposed
    input's rms_norm CloneBackward0 (the EXTRA cases gradcheck that layout)."""
    if op.name == "embedding":
        return "padding_idx" not in s.kwargs
    return not (op.name == "_rms_norm" and layout != "contig")


def _ln(L, *a, **k):
    return L.nn.functional.layer_norm(*a, **k)


def _dropout(L, x):
    L.manual_seed(0)  # the same mask in every evaluation
    return L.nn.functional.dropout(x, 0.4)


EXTRA = {
    "_native_layer_norm":
        _calls("_native_layer_norm", lambda L, x, w, b: _ln(L, x, (4,), w, b), X34, W4, B4, layouts=ALL4)
        + _calls("_native_layer_norm", lambda L, x: _ln(L, x, (3, 4), eps=0.1), X34, desc="2 dims, no affine")
        + _calls("_native_layer_norm", lambda L, x, w: _ln(L, x, (4,), w), X34, W4, desc="weight only"),
    "_rms_norm":
        _calls("_rms_norm", lambda L, x, w: L.nn.functional.rms_norm(x, (4,), w), X34, W4)
        # (torch names the node of a non-contiguous input's rms_norm CloneBackward0: gradcheck only)
        + _calls("_rms_norm", lambda L, x, w: L.nn.functional.rms_norm(x, (4,), w), X34, W4,
                 layouts=("T", "slice", "expand"), torch_ref=False)
        + _calls("_rms_norm", lambda L, x: L.nn.functional.rms_norm(x, (3, 4), eps=1e-3), X34, desc="2 dims"),
    "embedding":
        _calls("embedding", lambda L, w, i: L.nn.functional.embedding(i, w), EMB, IDX, desc="repeated rows"),
    "_native_dropout":  # torch's stream differs: a seeded mask for gradcheck, p = 1 against torch
        [GC("_native_dropout", (X34,), {}, "contig", "call", _dropout, "seeded", torch_ref=False),
         GC("_native_dropout", (X34,), {}, "contig", "call", lambda L, x: L.nn.functional.dropout(x, 1.0), "p=1")],
}
INPLACE_VIEW_EXTRA = []
GG = []  # second derivatives of the norms: tests/test_nn_norm.py
