"""Autocast's casts (Note [autocast]): which ops run in the low dtype, which
in float32, which promote; gradients return in the parameters' dtypes; the
values equal the same computation with the casts written by hand (NumPy
reference) and torch's CPU autocast when torch is installed. CPU autocast is
checked here; CUDA autocast uses the same machinery with torch's CUDA lists
and runs in the GPU tests."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F

try:
    import torch
except ImportError:  # the parity tests skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


def _bf16(a):
    """float32 -> bfloat16 -> float32, round to nearest even (the reference cast)."""
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def _data(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_matmul_runs_in_bfloat16_and_matches_hand_cast():
    a, b = _data(0, 5, 7), _data(1, 7, 3)
    x, w = ember.tensor(a), ember.tensor(b)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        y = x @ w
        y2 = ember.mm(x, w)
        y3 = F.linear(x, w.t(), ember.zeros(3))
    for r in (y, y2, y3):
        assert r.dtype == ember.bfloat16
        ref = _bf16(_bf16(a).astype(np.float64) @ _bf16(b).astype(np.float64))
        np.testing.assert_allclose(r.float().numpy(), ref, rtol=1e-2, atol=1e-2)
    # outside the block nothing is cast
    assert (x @ w).dtype == ember.float32


def test_fp32_policy_and_untouched_ops():
    x = ember.tensor(_data(2, 4, 6)).to(ember.bfloat16)
    t = ember.tensor([0, 5, 2, 1])
    with ember.autocast("cpu"):
        assert F.cross_entropy(x, t).dtype == ember.float32  # losses: float32
        assert (x * 2).dtype == ember.bfloat16  # no policy: the input's dtype
        assert x.exp().dtype == ember.bfloat16  # exp is float32 on CUDA only
        assert ember.cat([x, x.float()]).dtype == ember.float32  # promote to the widest


def test_float64_and_integers_are_never_cast():
    d = ember.tensor(_data(3, 3, 3)).double()
    i = ember.arange(9).reshape(3, 3)
    with ember.autocast("cpu"):
        assert (d @ d).dtype == ember.float64
        assert (i @ i).dtype == ember.int64


def test_in_place_and_out_variants_are_not_cast():
    x, w = ember.tensor(_data(4, 3, 3)), ember.tensor(_data(5, 3, 3))
    out = ember.empty(3, 3)
    with ember.autocast("cpu"):
        r = ember.mm(x, w, out=out)
    assert r is out and out.dtype == ember.float32
    np.testing.assert_allclose(out.numpy(), x.numpy() @ w.numpy(), rtol=1e-5, atol=1e-5)


def test_gradients_return_in_parameter_dtype():
    a, b = _data(6, 4, 5), _data(7, 5, 2)
    x = ember.tensor(a, requires_grad=True)
    w = ember.tensor(b, requires_grad=True)
    with ember.autocast("cpu"):
        y = x @ w
        assert type(y.grad_fn).__name__ == "MmBackward0"
        assert type(y.grad_fn.next_functions[0][0]).__name__ == "ToCopyBackward0"
    y.float().sum().backward()
    assert x.grad.dtype == ember.float32 and w.grad.dtype == ember.float32
    # d(sum(x @ w))/dx = 1 @ w^T, computed in bfloat16 from the cast w
    ref = np.ones((4, 2)) @ _bf16(b).T.astype(np.float64)
    np.testing.assert_allclose(x.grad.numpy(), _bf16(ref), rtol=1e-2, atol=1e-2)


def test_backward_inside_the_block_is_not_cast():
    x = ember.tensor(_data(8, 3, 3), requires_grad=True)
    with ember.autocast("cpu"):
        (x @ x).float().sum().backward()
    assert x.grad.dtype == ember.float32


def test_nested_and_disabled_blocks_restore_state():
    with ember.autocast("cpu", dtype=ember.bfloat16):
        with ember.autocast("cpu", enabled=False):
            assert (ember.ones(2, 2) @ ember.ones(2, 2)).dtype == ember.float32
        assert (ember.ones(2, 2) @ ember.ones(2, 2)).dtype == ember.bfloat16
    assert not ember.is_autocast_enabled("cpu")
    with pytest.raises(RuntimeError, match="unsupported autocast device_type"):
        ember.autocast("tpu")
    with pytest.warns(UserWarning, match="not supported"):
        ember.autocast("cpu", dtype=ember.float64)


def test_module_forward_under_autocast_trains():
    ember.manual_seed(0)
    m = ember.nn.Sequential(ember.nn.Linear(8, 16), ember.nn.GELU(), ember.nn.Linear(16, 4))
    opt = ember.optim.SGD(m.parameters(), lr=0.5)
    x, t = ember.randn(32, 8), ember.randint(0, 4, (32,))
    losses = []
    for _ in range(40):
        with ember.autocast("cpu", dtype=ember.bfloat16):
            loss = F.cross_entropy(m(x), t)
        assert loss.dtype == ember.float32
        opt.zero_grad()
        loss.backward()
        assert all(p.grad.dtype == ember.float32 for p in m.parameters())
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]


@needs_torch
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_matches_torch_cpu_autocast(dtype):
    """The same script under both libraries' CPU autocast: dtypes, node names, values, gradients."""
    a, b, c = _data(9, 6, 8), _data(10, 8, 4), _data(11, 4)
    results = {}
    for L in (ember, torch):
        x = L.tensor(a, requires_grad=True)
        w = L.tensor(b, requires_grad=True)
        bias = L.tensor(c, requires_grad=True)
        with L.autocast("cpu", dtype=getattr(L, dtype)):
            h = L.nn.functional.linear(x, w.t(), bias)
            s = L.cat([h, x[:, :4]], 1)
            loss = L.nn.functional.cross_entropy(h, L.tensor([0, 1, 2, 3, 0, 1]))
        (loss + s.float().sum()).backward()
        results[L.__name__] = (str(h.dtype).split(".")[-1], str(s.dtype).split(".")[-1],
                               str(loss.dtype).split(".")[-1], h.float().detach().numpy(),
                               x.grad.numpy(), w.grad.numpy(), bias.grad.numpy())
    e, t = results["ember"], results["torch"]
    assert e[:3] == t[:3]
    for u, v in zip(e[3:], t[3:]):
        np.testing.assert_allclose(u, v, rtol=2e-2, atol=2e-2)


def test_grad_scaler_cpu_matches_torch_through_an_overflow():
    """GradScaler('cpu') under autocast('cpu', bfloat16): scale growth every 2
    clean steps, an overflowing step (x * 1e38) skipped with the scale halved.
    Reference: torch 2.15 running this same loop (values stored below)."""
    ember.manual_seed(0)
    w = ember.nn.Parameter(ember.tensor([[1.0, -2.0], [0.5, 3.0]]))
    opt = ember.optim.SGD([w], lr=0.1)
    s = ember.amp.GradScaler("cpu", init_scale=2.0 ** 4, growth_interval=2)
    got = []
    for i in range(6):
        opt.zero_grad()
        x = ember.tensor([[1.0, 2.0]]) * (1e38 if i == 2 else 1.0)
        with ember.autocast("cpu", dtype=ember.bfloat16):
            loss = (x @ w).float().sum()
        s.scale(loss).backward()
        s.unscale_(opt)
        s.step(opt)
        s.update()
        got.append((s.get_scale(), [round(v, 6) for v in w.detach().flatten().tolist()]))
    torch_ref = [(16.0, [0.9, -2.1, 0.3, 2.8]), (32.0, [0.8, -2.2, 0.1, 2.6]), (16.0, [0.8, -2.2, 0.1, 2.6]),
                 (16.0, [0.7, -2.3, -0.1, 2.4]), (32.0, [0.6, -2.4, -0.3, 2.2]), (32.0, [0.5, -2.5, -0.5, 2.0])]
    assert got == torch_ref
    assert s.state_dict() == {"scale": 32.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2,
                              "_growth_tracker": 1}
