"""Calls whose results' strides torch decides by rule (Note [output layout],
Note [memory format]): mixed layouts in elementwise ops, clones of
non-dense tensors, cat / stack / roll / sort / pad / pixel_shuffle /
pooling / interpolation of channels-last inputs, and the ops torch answers
contiguously (masked_fill, scatter, index_add, tril). Each case takes the
module (ember or torch) and returns a tensor; tests/test_memory_format.py
compares the strides with data/layout_torch_reference.json, which
data/make_layout_reference.py writes with PyTorch."""


def _inputs(m):
    x = m.arange(120.).reshape(2, 3, 4, 5).contiguous(memory_format=m.channels_last)
    y = m.arange(120.).reshape(2, 3, 4, 5)
    t = x.transpose(2, 3).contiguous().transpose(2, 3)  # dense, strides (60, 20, 1, 4)
    x3 = m.arange(720.).reshape(2, 3, 4, 5, 6).contiguous(memory_format=m.channels_last_3d)
    return x, y, t, x3


def _grad(m, x, f):
    leaf = x.detach().clone().requires_grad_()
    out = f(leaf)
    out.backward(m.ones_like(out))
    return leaf.grad


def cases():
    F = lambda m: m.nn.functional  # noqa: E731
    return {
        "x + y": lambda m, x, y, t, x3: x + y,
        "y + x": lambda m, x, y, t, x3: y + x,
        "t + x": lambda m, x, y, t, x3: t + x,
        "x + t": lambda m, x, y, t, x3: x + t,
        "t + t": lambda m, x, y, t, x3: t + t,
        "x + (3,1,1)": lambda m, x, y, t, x3: x + m.ones(3, 1, 1),
        "(2,3,4,1) + x": lambda m, x, y, t, x3: m.ones(2, 3, 4, 1) + x,
        "x * (4,5)": lambda m, x, y, t, x3: x * m.ones(4, 5),
        "x[:, :, :1, :1] + 1": lambda m, x, y, t, x3: x[:, :, :1, :1] + 1,
        "x.permute(0,2,3,1) + 1": lambda m, x, y, t, x3: x.permute(0, 2, 3, 1) + 1,
        "x3 + 1": lambda m, x, y, t, x3: x3 + 1,
        "where(x > 0, x, 0.)": lambda m, x, y, t, x3: m.where(x > 0, x, 0.),
        "x.exp()": lambda m, x, y, t, x3: x.exp(),
        "t.exp()": lambda m, x, y, t, x3: t.exp(),
        "x[:, :, :1, :1].clone()": lambda m, x, y, t, x3: x[:, :, :1, :1].clone(),
        "x[:, :2].clone()": lambda m, x, y, t, x3: x[:, :2].clone(),
        "x[:1].expand(2,3,4,5).clone()": lambda m, x, y, t, x3: x[:1].expand(2, 3, 4, 5).clone(),
        "empty_like(t)": lambda m, x, y, t, x3: m.empty_like(t),
        "empty_like(x[::2])": lambda m, x, y, t, x3: m.empty_like(x[::2]),
        "t.clone()": lambda m, x, y, t, x3: t.clone(),
        "x[:, :, :1, :1].contiguous(channels_last)":
            lambda m, x, y, t, x3: x[:, :, :1, :1].contiguous(memory_format=m.channels_last),
        "empty(2,0,4,5, channels_last)": lambda m, x, y, t, x3: m.empty(2, 0, 4, 5, memory_format=m.channels_last),
        "masked_fill": lambda m, x, y, t, x3: x.masked_fill(x > 10, 0),
        "masked_fill tensor": lambda m, x, y, t, x3: x.masked_fill(x > 10, m.tensor(0.)),
        "masked_scatter": lambda m, x, y, t, x3: x.masked_scatter(x > 10, y),
        "scatter": lambda m, x, y, t, x3: x.scatter(1, m.zeros(2, 1, 4, 5, dtype=m.long), 0.),
        "scatter_add": lambda m, x, y, t, x3: x.scatter_add(1, m.zeros(2, 1, 4, 5, dtype=m.long), y),
        "scatter_reduce": lambda m, x, y, t, x3: x.scatter_reduce(1, m.zeros(2, 1, 4, 5, dtype=m.long), y, "sum"),
        "index_add": lambda m, x, y, t, x3: x.index_add(1, m.tensor([0]), y[:, :1]),
        "index_copy": lambda m, x, y, t, x3: x.index_copy(1, m.tensor([0]), y[:, :1].contiguous()),
        "index_fill": lambda m, x, y, t, x3: x.index_fill(1, m.tensor([0]), 0.),
        "index_put": lambda m, x, y, t, x3: x.index_put((m.tensor([0]),), m.tensor(1.)),
        "tril": lambda m, x, y, t, x3: x.tril(),
        "triu": lambda m, x, y, t, x3: x.triu(1),
        "cat dim 0": lambda m, x, y, t, x3: m.cat([x, x]),
        "cat dim 1": lambda m, x, y, t, x3: m.cat([x, x], 1),
        "cat dim 3": lambda m, x, y, t, x3: m.cat([x, x], 3),
        "cat mixed": lambda m, x, y, t, x3: m.cat([y, x], 1),
        "cat t": lambda m, x, y, t, x3: m.cat([t, t], 1),
        "cat 3d": lambda m, x, y, t, x3: m.cat([x3, x3]),
        "stack 0": lambda m, x, y, t, x3: m.stack([x, x], 0),
        "stack 1": lambda m, x, y, t, x3: m.stack([x, x], 1),
        "stack 2": lambda m, x, y, t, x3: m.stack([x, x], 2),
        "stack 3": lambda m, x, y, t, x3: m.stack([x, x], 3),
        "stack 4": lambda m, x, y, t, x3: m.stack([x, x], 4),
        "stack mixed": lambda m, x, y, t, x3: m.stack([x, y], 1),
        "stack t": lambda m, x, y, t, x3: m.stack([t, t], 2),
        "roll dim": lambda m, x, y, t, x3: x.roll(1, 1),
        "roll dims": lambda m, x, y, t, x3: x.roll((1, 1), (1, 2)),
        "roll flat": lambda m, x, y, t, x3: x.roll(1),
        "roll t": lambda m, x, y, t, x3: t.roll(1, 2),
        "flip": lambda m, x, y, t, x3: x.flip(1),
        "flip t": lambda m, x, y, t, x3: t.flip(1),
        "sort": lambda m, x, y, t, x3: x.sort(1)[0],
        "argsort": lambda m, x, y, t, x3: x.argsort(1),
        "topk": lambda m, x, y, t, x3: x.topk(2, 1)[0],
        "pad constant": lambda m, x, y, t, x3: F(m).pad(x, (1, 1)),
        "pad constant t": lambda m, x, y, t, x3: F(m).pad(t, (1, 1)),
        "pad channels": lambda m, x, y, t, x3: F(m).pad(x, (0, 0, 0, 0, 1, 1)),
        "pad crop": lambda m, x, y, t, x3: F(m).pad(x, (-1, 1)),
        "pad reflect": lambda m, x, y, t, x3: F(m).pad(x, (1, 1, 1, 1), mode="reflect"),
        "pad replicate": lambda m, x, y, t, x3: F(m).pad(x, (1, 1, 1, 1), mode="replicate"),
        "pad circular": lambda m, x, y, t, x3: F(m).pad(x, (1, 1, 1, 1), mode="circular"),
        "pixel_shuffle": lambda m, x, y, t, x3: F(m).pixel_shuffle(
            m.ones(1, 8, 2, 2).contiguous(memory_format=m.channels_last), 2),
        "pixel_unshuffle": lambda m, x, y, t, x3: F(m).pixel_unshuffle(
            x[:, :, :4, :4].contiguous(memory_format=m.channels_last), 2),
        "adaptive_avg_pool2d 1": lambda m, x, y, t, x3: F(m).adaptive_avg_pool2d(x, 1),
        "adaptive_avg_pool2d (2,3)": lambda m, x, y, t, x3: F(m).adaptive_avg_pool2d(x, (2, 3)),
        "adaptive_avg_pool2d t": lambda m, x, y, t, x3: F(m).adaptive_avg_pool2d(t, 1),
        "adaptive_max_pool2d 1": lambda m, x, y, t, x3: F(m).adaptive_max_pool2d(x, 1),
        "adaptive_max_pool2d 2": lambda m, x, y, t, x3: F(m).adaptive_max_pool2d(x, 2),
        "adaptive_max_pool2d indices": lambda m, x, y, t, x3: F(m).adaptive_max_pool2d(x, 2, return_indices=True)[1],
        "interpolate nearest 3d": lambda m, x, y, t, x3: F(m).interpolate(x3, scale_factor=2),
        "interpolate trilinear 3d": lambda m, x, y, t, x3: F(m).interpolate(x3, scale_factor=2, mode="trilinear"),
        "interpolate nearest 3d contiguous": lambda m, x, y, t, x3: F(m).interpolate(x3.contiguous(), scale_factor=2),
        "max_pool3d": lambda m, x, y, t, x3: F(m).max_pool3d(x3, 2),
        "max_pool3d indices": lambda m, x, y, t, x3: F(m).max_pool3d(x3, 2, return_indices=True)[1],
        "avg_pool3d": lambda m, x, y, t, x3: F(m).avg_pool3d(x3, 2),
        "adaptive_avg_pool3d": lambda m, x, y, t, x3: F(m).adaptive_avg_pool3d(x3, 2),
        "adaptive_max_pool3d": lambda m, x, y, t, x3: F(m).adaptive_max_pool3d(x3, 2),
        "conv3d": lambda m, x, y, t, x3: F(m).conv3d(x3, m.ones(2, 3, 3, 3, 3)),
        "batch_norm 3d": lambda m, x, y, t, x3: F(m).batch_norm(x3, None, None, training=True),
        "channel_shuffle": lambda m, x, y, t, x3: F(m).channel_shuffle(
            m.ones(1, 4, 2, 2).contiguous(memory_format=m.channels_last), 2),
        "binary_cross_entropy none": lambda m, x, y, t, x3: F(m).binary_cross_entropy(
            (x / 200).sigmoid(), (y / 200).sigmoid(), reduction="none"),
        "conv2d": lambda m, x, y, t, x3: F(m).conv2d(x, m.ones(6, 3, 3, 3), padding=1),
        "max_pool2d": lambda m, x, y, t, x3: F(m).max_pool2d(x, 2),
        "batch_norm": lambda m, x, y, t, x3: F(m).batch_norm(x, None, None, training=True),
        "interpolate bilinear": lambda m, x, y, t, x3: F(m).interpolate(x, scale_factor=2, mode="bilinear"),
        "grad of tanh": lambda m, x, y, t, x3: _grad(m, x, lambda v: v.tanh()),
        "grad of conv2d": lambda m, x, y, t, x3: _grad(m, x, lambda v: F(m).conv2d(v, m.ones(6, 3, 3, 3), padding=1)),
        "grad of + y": lambda m, x, y, t, x3: _grad(m, x, lambda v: v + y),
    }


def strides_of(m):
    """{case: [shape, strides]} for module m"""
    ins = _inputs(m)
    out = {}
    for name, f in cases().items():
        r = f(m, *ins)
        out[name] = [list(r.shape), list(r.stride())]
    return out
