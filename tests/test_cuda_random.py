"""Random numbers on the GPU (Note [GPU random numbers], csrc/cuda/philox.h):
the Philox4x32-10 known-answer vector, seeding and state, each
distribution's moments and ranges, non-contiguous fills, explicit host
generators. On a real GPU when present, else on Note [fake CUDA], whose
random fill computes the same stream on the host."""

import pickle

import numpy as np
import pytest

import ember
from ember import _C




def test_philox_known_answer(cuda):
    """Random123's KAT: Philox4x32-10, counter 0 and key 0 give
    6627e8d5 e169c58d bc57ac4c 9b00dbd8. An int64 random_() of block 0 takes
    the words pairwise (low word first) modulo 2**63."""
    _C._cuda_generator(0, 0)  # seed 0, offset 0: key 0, counter {0, 0}
    t = ember.empty(2, dtype=ember.int64, device="cuda").random_()
    assert t.tolist() == [0xE169C58D6627E8D5 % 2 ** 63, 0x9B00DBD8BC57AC4C % 2 ** 63]


def test_seeding_and_state(cuda):
    ember.cuda.manual_seed(123)
    a = ember.rand(10, device="cuda")
    ember.cuda.manual_seed(123)
    assert ember.equal(a, ember.rand(10, device="cuda"))
    assert not ember.equal(a, ember.rand(10, device="cuda"))  # the next launch draws afresh
    state = ember.cuda.get_rng_state()
    assert state.dtype == ember.uint8 and state.numel() == 16
    x = ember.randn(5, device="cuda")
    ember.cuda.set_rng_state(state)
    assert ember.equal(x, ember.randn(5, device="cuda"))
    ember.manual_seed(7)  # seeds the GPUs too
    y = ember.rand(4, device="cuda")
    ember.cuda.manual_seed_all(7)
    assert ember.equal(y, ember.rand(4, device="cuda"))
    assert ember.cuda.initial_seed() == 7


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_uniform_and_normal_moments(cuda, dtype):
    n = 200_000
    ember.cuda.manual_seed(1)
    u = ember.empty(n, dtype=getattr(ember, dtype), device="cuda").uniform_(-2, 3).cpu().double().numpy()
    assert u.min() >= -2 and u.max() <= 3  # halves may round up to the bound
    assert abs(u.mean() - 0.5) < 0.02 and abs(u.var() - 25 / 12) < 0.05
    z = ember.empty(n, dtype=getattr(ember, dtype), device="cuda").normal_(1.5, 2.0).cpu().double().numpy()
    assert abs(z.mean() - 1.5) < 0.03 and abs(z.std() - 2.0) < 0.03
    # the tails: beyond 3 sigma p = 0.0027 (540 expected), beyond 5 sigma 0.1 expected
    assert 400 < (np.abs(z - 1.5) > 6).sum() < 700 and (np.abs(z - 1.5) > 10).sum() <= 3


def test_integer_bernoulli_exponential(cuda):
    ember.cuda.manual_seed(2)
    r = ember.randint(-3, 5, (100_000,), device="cuda").cpu().numpy()
    assert r.dtype == np.int64 and r.min() == -3 and r.max() == 4
    counts = np.bincount(r + 3)
    assert counts.min() > 11_500 and counts.max() < 13_500
    b = ember.empty(100_000, device="cuda").bernoulli_(0.3).cpu().numpy()
    assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 0.01
    e = ember.empty(100_000, dtype=ember.float64, device="cuda").exponential_(4.0).cpu().numpy()
    assert e.min() >= 0 and abs(e.mean() - 0.25) < 0.005
    bytes_ = ember.empty(10_000, dtype=ember.uint8, device="cuda").random_().cpu().numpy()
    assert bytes_.min() == 0 and bytes_.max() == 255


def test_non_contiguous_fill_follows_logical_order(cuda):
    ember.cuda.manual_seed(3)
    flat = ember.rand(12, device="cuda")
    ember.cuda.manual_seed(3)
    t = ember.empty(4, 3, device="cuda").t()  # 3x4, transposed
    t.uniform_()
    np.testing.assert_array_equal(t.cpu().numpy().ravel(), flat.cpu().numpy())


def test_cuda_generator_draws_its_own_philox_stream(cuda):
    """Generator(device='cuda') is a Philox (seed, offset) like the device's
    default one: seeded alike, the two draw the same numbers; reseeding
    replays; each launch moves on; its state is torch's 16 bytes."""
    g = ember.Generator(device="cuda")
    assert g.device == ember.device("cuda", 0)
    g.manual_seed(11)
    a = ember.rand(6, generator=g, device="cuda")
    ember.cuda.manual_seed(11)
    np.testing.assert_array_equal(a.cpu().numpy(), ember.rand(6, device="cuda").cpu().numpy())
    b = ember.randn(6, generator=g, device="cuda")
    assert not ember.equal(b, ember.randn(6, generator=g, device="cuda"))
    assert g.initial_seed() == 11
    state = g.get_state()
    assert state.dtype == ember.uint8 and state.numel() == 16
    x = ember.empty(5, device="cuda").normal_(generator=g)
    g.set_state(state)
    np.testing.assert_array_equal(x.cpu().numpy(), ember.empty(5, device="cuda").normal_(generator=g).cpu().numpy())
    g2 = pickle.loads(pickle.dumps(g))
    assert g2.device == g.device
    np.testing.assert_array_equal(ember.rand(4, generator=g, device="cuda").cpu().numpy(),
                                  ember.rand(4, generator=g2, device="cuda").cpu().numpy())
    with pytest.raises(RuntimeError, match="16 bytes"):
        g.set_state(ember.zeros(3, dtype=ember.uint8))


def test_generator_must_match_the_device_type(cuda):
    with pytest.raises(RuntimeError, match="Expected a 'cuda' device type for generator but found 'cpu'"):
        ember.rand(6, generator=ember.Generator(), device="cuda")
    with pytest.raises(RuntimeError, match="Expected a 'cpu' device type for generator but found 'cuda'"):
        ember.rand(6, generator=ember.Generator(device="cuda"))
    if ember.cuda.device_count() > 1:
        with pytest.raises(RuntimeError, match="cuda:1"):
            ember.rand(3, generator=ember.Generator(device="cuda:0"), device="cuda:1")


def test_dropout_on_the_device(cuda):
    ember.cuda.manual_seed(4)
    x = ember.ones(10_000, device="cuda")
    y = ember.nn.functional.dropout(x, 0.25)
    kept = y.cpu().numpy()
    assert y.is_cuda and set(np.unique(kept)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((kept == 0).mean() - 0.25) < 0.02


def test_errors(cuda):
    with pytest.raises(RuntimeError, match="from"):
        ember.empty(3, device="cuda").uniform_(2, 1)
    with pytest.raises(RuntimeError, match="std"):
        ember.empty(3, device="cuda").normal_(0, -1)
    with pytest.raises(RuntimeError, match="16 bytes"):
        ember.cuda.set_rng_state(ember.zeros(3, dtype=ember.uint8))


def test_per_element_bernoulli_with_generators(cuda):
    """Per-element probabilities draw on the device from the generator given
    (or the device's): seeded alike, the same mask; p outside [0, 1] is an
    error, checked on the device."""
    t = ember.empty(4000, device="cuda")
    p = ember.rand(4000, device="cuda")
    g = ember.Generator(device="cuda").manual_seed(3)
    a = t.bernoulli_(p, generator=g).cpu().numpy()
    g.manual_seed(3)
    b = ember.bernoulli(p, generator=g).cpu().numpy()
    np.testing.assert_array_equal(a, b)
    assert set(np.unique(a)) <= {0.0, 1.0}
    pn = p.cpu().numpy()
    assert abs(a.mean() - pn.mean()) < 0.03 and a[pn < 0.01].sum() <= 2 and a[pn > 0.99].mean() > 0.9
    c = ember.empty(4000, device="cuda").bernoulli_(ember.full((4000,), 0.8, device="cuda"))
    assert abs(c.cpu().numpy().mean() - 0.8) < 0.03
    assert not _C._cuda_fallback_counts(False).get("bernoulli")
    with pytest.raises(RuntimeError, match=r"\[0, 1\]"):
        t.bernoulli_(p + 1)
    with pytest.raises(RuntimeError, match="Expected a 'cuda' device type"):
        t.bernoulli_(p, generator=ember.Generator())
