"""Gradcheck cases for the convolution formulas (csrc/autograd/derivatives_conv.c),
merged into tests/test_autograd_ops.py's tables. Calls go through nn.functional
(torch's internals for the fused backward) so the same case runs on torch."""
from autograd_common import GC, _ts, _vals

DB_KINDS = set()
INPLACE_VIEW_EXTRA = []

X = _ts(_vals(("conv_x",), (2, 4, 5, 4)))
W = _ts(_vals(("conv_w",), (6, 2, 3, 2)))
B = _ts(_vals(("conv_b",), (6,)), lay=False)
X1 = _ts(_vals(("conv_x1",), (2, 4, 7)))
W1 = _ts(_vals(("conv_w1",), (3, 4, 3)))
COLS = _ts(_vals(("cols",), (2, 12, 6)))  # C = 3, kernel (2, 2), blocks 3 x 2 of a 4 x 4 image, stride (1, 2)
GY = _ts(_vals(("conv_gy",), (2, 6, 3, 5)))  # conv(X, W, stride (2, 1), padding (1, 1), groups 2)
X3 = _ts(_vals(("conv_x3",), (1, 2, 3, 4, 3)))
W3 = _ts(_vals(("conv_w3",), (2, 2, 2, 2, 2)))


def _f(L):
    return L.nn.functional


def _fused_backward(L, gy, x, w):
    """the fused backward op itself (torch: aten.convolution_backward), every output wanted"""
    args = ([2, 1], [1, 1], [1, 1])
    if L.__name__ == "torch":
        return L.ops.aten.convolution_backward(gy, x, w, [w.shape[0]], *args, False, [0, 0], 2, [True] * 3)
    return L._C._convolution_backward(gy, x, w, *args, 2, [1, 1, 1])


def _cases(op, fns, args, layouts=("contig", "T")):
    return [GC(op, args, {}, lay, "call", fn, desc=desc) for desc, fn in fns for lay in layouts]


EXTRA = {
    "_im2col": _cases("_im2col", [
        ("unfold", lambda L, x: _f(L).unfold(x, (2, 3), dilation=(2, 1), padding=1, stride=(1, 2))),
        ("unbatched overlapping", lambda L, x: _f(L).unfold(x[0], 2)),
    ], (X,)),
    "_col2im": _cases("_col2im", [
        ("fold", lambda L, c: _f(L).fold(c, (4, 4), 2, stride=(1, 2))),
        ("unbatched, padded", lambda L, c: _f(L).fold(c[0], (2, 4), 2, padding=(1, 0), dilation=(1, 2))),
    ], (COLS,)),
    "_convolution": _cases("_convolution", [
        ("conv2d groups, strided", lambda L, x, w, b: _f(L).conv2d(x, w, b, stride=(2, 1), padding=1, groups=2)),
        ("conv2d dilated, no bias", lambda L, x, w, b: _f(L).conv2d(x, w[:4], None, dilation=(2, 1), groups=2)
         + b[:4].view(1, 4, 1, 1)),
        ("conv2d same", lambda L, x, w, b: _f(L).conv2d(x[1], w, b, padding="same", groups=2)),
    ], (X, W, B)) + _cases("_convolution", [
        ("conv1d", lambda L, x, w: _f(L).conv1d(x, w, stride=2, padding=2, dilation=2)),
        ("conv1d 1x1", lambda L, x, w: _f(L).conv1d(x, w[:, :, :1])),
    ], (X1, W1)),
    "_convolution_backward": _cases("_convolution_backward", [("fused backward", _fused_backward)], (GY, X, W)),
}
# 3-d and transposed convolutions (nn/_conv_nd.py)
EXTRA["_convolution"] += _cases("_convolution", [
    ("conv3d", lambda L, x, w: _f(L).conv3d(x, w, stride=(1, 2, 1), padding=1, dilation=(1, 1, 2))),
], (X3, W3))
EXTRA["_convolution_transpose"] = _cases("_convolution_transpose", [
    ("conv_transpose2d", lambda L, x, w, b: _f(L).conv_transpose2d(x, w[:4], b[:4], 2, 1, 1, groups=2)),
    ("conv_transpose1d, output_padding >= stride", lambda L, x, w, b: _f(L).conv_transpose1d(
        x[:, :, 0], w[:4, :, 0], b[:2], 1, 1, 1, 1, 2)),
], (X, W, B)) + _cases("_convolution_transpose", [
    ("conv_transpose3d", lambda L, x, w: _f(L).conv_transpose3d(x, w, None, 2, (1, 0, 1), 1, dilation=(1, 2, 1))),
], (X3, W3))

_F = __import__("ember").nn.functional
GG = [
    ("conv1d", lambda a, b: _F.conv1d(a.reshape(1, 2, 3), b.reshape(2, 1, 3), padding=1, groups=2), 2),
    ("conv2d", lambda a, b: _F.conv2d(a.reshape(1, 1, 2, 3), b.reshape(1, 1, 2, 3), b[0, :1], padding=1), 2),
    ("conv2d strided", lambda a, b: _F.conv2d(a.reshape(1, 2, 3, 1), b.reshape(3, 2, 1, 1), stride=2), 2),
    ("unfold", lambda a: _F.unfold((a * a).reshape(1, 1, 2, 3), 2, padding=1), 1),
    ("fold", lambda a: _F.fold((a * a).reshape(1, 2, 3), (4, 1), (2, 1)), 1),
]
