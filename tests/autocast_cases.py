"""Calls whose result dtypes under autocast('cpu') show torch's policy for the
op: written once for any torch-like module L, run by
tests/data/make_autocast_reference.py in PyTorch and by tests/test_autocast_table.py
in ember. Inputs are float32 unless a case mixes in a lower-precision tensor."""


def _f(L, *shape, dtype=None):
    g = L.Generator().manual_seed(sum(shape) + 7)
    return L.rand(*shape, generator=g) if dtype is None else L.rand(*shape, generator=g).to(dtype)


def cases(L, low):
    F = L.nn.functional
    f = lambda *s: _f(L, *s)  # noqa: E731
    lo = lambda *s: _f(L, *s, dtype=low)  # noqa: E731
    idx = L.tensor([0, 1, 2])
    return {
        # lower precision
        "mm": lambda: L.mm(f(2, 3), f(3, 4)),
        "bmm": lambda: L.bmm(f(2, 2, 3), f(2, 3, 2)),
        "matmul": lambda: L.matmul(f(2, 3), f(3, 4)),
        "matmul @": lambda: f(2, 3) @ f(3, 4),
        "addmm": lambda: L.addmm(f(2, 4), f(2, 3), f(3, 4)),
        "baddbmm": lambda: L.baddbmm(f(2, 2, 2), f(2, 2, 3), f(2, 3, 2)),
        "addbmm": lambda: L.addbmm(f(2, 2), f(2, 2, 3), f(2, 3, 2)),
        "linear": lambda: F.linear(f(2, 3), f(4, 3), f(4)),
        "conv1d": lambda: F.conv1d(f(1, 2, 6), f(3, 2, 3)),
        "conv2d": lambda: F.conv2d(f(1, 2, 5, 5), f(3, 2, 3, 3), f(3)),
        "conv_transpose2d": lambda: F.conv_transpose2d(f(1, 2, 4, 4), f(2, 3, 3, 3)),
        "scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(f(1, 2, 4, 8), f(1, 2, 4, 8),
                                                                             f(1, 2, 4, 8)),
        "prelu": lambda: F.prelu(f(2, 3), f(1)),
        # float32
        "prod": lambda: L.prod(lo(3)),
        "trace": lambda: L.trace(lo(3, 3)),
        "nll_loss": lambda: F.nll_loss(lo(3, 4), idx),
        "cross_entropy": lambda: F.cross_entropy(lo(3, 4), idx),
        "mse_loss": lambda: F.mse_loss(lo(3), lo(3)),
        "l1_loss": lambda: F.l1_loss(lo(3), lo(3)),
        "smooth_l1_loss": lambda: F.smooth_l1_loss(lo(3), lo(3)),
        "huber_loss": lambda: F.huber_loss(lo(3), lo(3)),
        "binary_cross_entropy_with_logits": lambda: F.binary_cross_entropy_with_logits(lo(3), lo(3)),
        "kl_div": lambda: F.kl_div(lo(3), lo(3), reduction="batchmean"),
        "soft_margin_loss": lambda: F.soft_margin_loss(lo(3), lo(3)),
        "cdist": lambda: L.cdist(lo(2, 3), lo(4, 3)),
        "quantile": lambda: L.quantile(lo(5), 0.5),
        "inverse": lambda: L.inverse(lo(2, 2) + 2 * L.eye(2).to(low)),
        "cholesky": lambda: L.linalg.cholesky(L.eye(2).to(low) * 2),
        "fft": lambda: L.fft.rfft(lo(8)).real,
        "max_pool3d": lambda: F.max_pool3d(lo(1, 1, 2, 4, 4), 2),
        "adaptive_avg_pool3d": lambda: F.adaptive_avg_pool3d(lo(1, 1, 2, 4, 4), 1),
        "avg_pool3d": lambda: F.avg_pool3d(lo(1, 1, 2, 4, 4), 2),
        "grid_sample": lambda: F.grid_sample(lo(1, 1, 4, 4), lo(1, 2, 2, 2) * 2 - 1, align_corners=False),
        # promote: the widest input dtype
        "cat": lambda: L.cat([lo(2), f(2)]),
        "stack": lambda: L.stack([lo(2), f(2)]),
        "index_copy": lambda: lo(3).index_copy(0, L.tensor([0]), f(1)),
        # not listed: the input dtype as without autocast
        "add": lambda: lo(3) + f(3),
        "relu": lambda: F.relu(f(3)),
        "softmax": lambda: F.softmax(f(2, 3), -1),
        "layer_norm": lambda: F.layer_norm(f(2, 4), (4,)),
        "gelu": lambda: F.gelu(f(3)),
        "sum": lambda: f(3).sum(),
        "exp": lambda: L.exp(lo(3)),
        "max_pool2d": lambda: F.max_pool2d(f(1, 1, 4, 4), 2),
        "batch_norm": lambda: F.batch_norm(f(2, 3), None, None, training=True),
        "embedding": lambda: F.embedding(idx, f(4, 3)),
        "dropout": lambda: F.dropout(f(3), 0.0),
    }
