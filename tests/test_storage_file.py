"""UntypedStorage.from_file, storage slicing, asarray of a storage and
view(dtype=): what safetensors' torch loader does to map a checkpoint
(torch.asarray(storage[a:b], dtype=uint8).view(dtype=...).reshape(shape)).
Values are checked against NumPy reading the same file."""
import numpy as np
import pytest

import ember


def test_from_file_maps_the_file_and_slices_share_it(tmp_path):
    f = tmp_path / "w.bin"
    data = np.arange(12, dtype=np.float32)
    data.tofile(f)
    s = ember.UntypedStorage.from_file(str(f), shared=False, nbytes=data.nbytes)
    assert len(s) == 48 and s.untyped() is s and s[4] == data.view(np.uint8)[4]
    part = s[8:24]
    assert part.nbytes() == 16 and part.data_ptr() == s.data_ptr() + 8
    t = ember.asarray(part, dtype=ember.uint8).view(dtype=ember.float32).reshape([2, 2])
    np.testing.assert_array_equal(t.numpy(), data[2:6].reshape(2, 2))
    t.mul_(10)  # shared=False: private pages, the file keeps its bytes
    np.testing.assert_array_equal(np.fromfile(f, np.float32), data)
    np.testing.assert_array_equal(ember.asarray(s, dtype=ember.uint8).view(ember.float32)[2:6].numpy(),
                                  data[2:6] * 10)


def test_shared_from_file_writes_through_and_grows_the_file(tmp_path):
    f = tmp_path / "new.bin"
    s = ember.UntypedStorage.from_file(str(f), shared=True, nbytes=16)
    ember.asarray(s, dtype=ember.uint8).view(ember.int32).copy_(ember.tensor([1, 2, 3, 4], dtype=ember.int32))
    del s
    np.testing.assert_array_equal(np.fromfile(f, np.int32), [1, 2, 3, 4])


def test_from_file_errors(tmp_path):
    f = tmp_path / "small.bin"
    f.write_bytes(b"abc")
    with pytest.raises(RuntimeError, match="fewer than the 8 asked for"):
        ember.UntypedStorage.from_file(str(f), shared=False, nbytes=8)
    with pytest.raises(RuntimeError, match="unable to open file"):
        ember.UntypedStorage.from_file(str(tmp_path / "missing.bin"), shared=False, nbytes=4)
    s = ember.UntypedStorage.from_file(str(f), shared=False, nbytes=3)
    with pytest.raises(IndexError, match="out of range"):
        s[3]
    with pytest.raises(RuntimeError, match="only a step of 1"):
        s[0:3:2]
    with pytest.raises(TypeError, match="integers or slices"):
        s["a"]


def test_view_takes_the_dtype_as_keyword():
    x = ember.arange(4.0)
    v = x.view(dtype=ember.int32)
    assert v.dtype == ember.int32 and tuple(v.shape) == (4,)
    np.testing.assert_array_equal(v.numpy(), np.arange(4.0, dtype=np.float32).view(np.int32))
    assert tuple(x.view(2, 2).shape) == (2, 2) and x.view(ember.int16).shape == (8,)
    with pytest.raises(TypeError):
        x.view()
