"""The CPU block cache (csrc/core/alloc.c, Note [CPU block cache]): freed big
blocks are reused, and reuse never leaks old contents into factories that
promise values."""
import numpy as np

import ember


def info():
    return ember._C._cpu_cache_info()


def test_freed_big_block_is_reused():
    n = 300_000  # 1.2 MB: cached
    x = ember.empty(n)
    del x
    before = info()
    y = ember.empty(n)
    after = info()
    assert after["hits"] == before["hits"] + 1
    assert after["cached_bytes"] < before["cached_bytes"]
    del y


def test_small_blocks_bypass_the_cache():
    before = info()
    for _ in range(10):
        ember.empty(100)
    assert info()["hits"] == before["hits"] and info()["misses"] == before["misses"]


def test_reused_blocks_hold_fresh_values():
    n = 1 << 20
    a = ember.full((n,), 7.0)
    del a
    np.testing.assert_array_equal(ember.zeros(n).numpy(), np.zeros(n, np.float32))
    b = ember.full((n,), 3.0)
    del b
    np.testing.assert_array_equal(ember.ones(n, dtype=ember.float32).numpy(), np.ones(n, np.float32))
    c = ember.arange(n, dtype=ember.float64)
    np.testing.assert_array_equal(c.numpy(), np.arange(n, dtype=np.float64))


def test_sizes_between_classes_get_enough_room():
    # every size around class boundaries is writable end to end
    for n in [65_536, 65_537, 81_919, 81_920, 81_921, 131_071, 131_072, 131_073, 229_377]:
        x = ember.arange(n, dtype=ember.float32)
        assert float(x[-1]) == n - 1
        del x


def test_clear_returns_blocks():
    x = ember.empty(1 << 20)
    del x
    assert info()["cached_bytes"] > 0
    ember._C._cpu_cache_clear()
    assert info()["cached_bytes"] == 0
