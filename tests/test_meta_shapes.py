"""Shape rules on the meta device (Note [meta device]) for the fused nn,
indexing, sort, loss, pool and vector-product rows, in the cases the op_db
sweep of test_meta.py does not reach: strided / padded / dilated / grouped
convolutions, output_padding, grouped-query attention, the loss reductions,
ceil_mode pools. Expected shapes are torch's documented output-size formulas
worked by hand (written next to each case) and strides the contiguous ones
torch's meta kernels give (read from torch 2.15); the errors are torch's on
meta. Then two small models built under `with ember.device('meta')` run
forward and backward without data."""
import pytest

import ember
import ember.nn as nn
from ember import _C
import ember.nn.functional as F

META = "meta"


def meta(*shape, dtype=ember.float32, requires_grad=False):
    return ember.empty(*shape, device=META, dtype=dtype, requires_grad=requires_grad)


def index(*shape):
    return ember.empty(*shape, device=META, dtype=ember.int64)


def check(t, shape, stride=None, dtype=ember.float32):
    assert isinstance(t, ember.Tensor) and t.is_meta
    assert tuple(t.shape) == shape, (tuple(t.shape), shape)
    assert t.dtype == dtype, (t.dtype, dtype)
    if stride is not None:
        assert t.stride() == stride, (t.stride(), stride)


# ------------------------------------------------------------------ convolution
def test_conv2d_stride_padding_dilation_groups():
    # out = floor((n + 2p - d(k - 1) - 1) / s) + 1:
    #   H: (11 + 2 - 2*2 - 1) // 2 + 1 = 5, W: (13 + 4 - 1*4 - 1) // 3 + 1 = 5
    y = F.conv2d(meta(2, 4, 11, 13), meta(6, 2, 3, 5), meta(6), stride=(2, 3), padding=(1, 2), dilation=(2, 1),
                 groups=2)
    check(y, (2, 6, 5, 5), (150, 25, 5, 1))
    # 1-d: (17 + 4 - 2*3 - 1) // 3 + 1 = 5
    check(F.conv1d(meta(3, 4, 17), meta(8, 4, 4), stride=3, padding=2, dilation=2), (3, 8, 5), (40, 5, 1))
    # 3-d, unit stride: 6 - 3 + 1 = 4, 5 - 2 + 1 = 4, 4 - 1 + 1 = 4
    check(F.conv3d(meta(1, 2, 6, 5, 4), meta(3, 2, 3, 2, 1)), (1, 3, 4, 4, 4))
    check(nn.Conv2d(3, 5, 3, padding="same", device=META)(meta(2, 3, 7, 9)), (2, 5, 7, 9))


def test_conv_checks_still_run_on_meta():
    with pytest.raises(RuntimeError, match="expected input\\[2, 3, 7, 7\\] to have 4 channels"):
        F.conv2d(meta(2, 3, 7, 7), meta(5, 4, 3, 3))
    with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input size"):
        F.conv2d(meta(1, 1, 2, 2), meta(1, 1, 3, 3))


def test_conv_transpose_output_padding():
    # out = (n - 1) s - 2p + d(k - 1) + output_padding + 1:
    #   H: 4*3 - 2 + 1*2 + 2 + 1 = 15, W: 6*2 - 0 + 2*1 + 1 + 1 = 16
    y = F.conv_transpose2d(meta(2, 4, 5, 7), meta(4, 3, 3, 2), stride=(3, 2), padding=(1, 0), output_padding=(2, 1),
                           dilation=(1, 2))
    check(y, (2, 3, 15, 16), (720, 240, 16, 1))
    # groups=2: C_out = 3 * 2; H: 4*2 - 2 + 2 + 1 + 1 = 10, W: 6*2 - 2 + 1 + 1 + 1 = 13
    y = F.conv_transpose2d(meta(2, 4, 5, 7), meta(4, 3, 3, 2), meta(6), stride=2, padding=1, output_padding=1,
                           groups=2)
    check(y, (2, 6, 10, 13), (780, 130, 13, 1))
    # 1-d: (8 - 1) * 2 + (3 - 1) + 1 = 17
    check(F.conv_transpose1d(meta(1, 2, 8), meta(2, 4, 3), stride=2), (1, 4, 17))


def test_convolution_backward_gives_the_gradients_shapes():
    x, w, b = meta(2, 4, 9, 9, requires_grad=True), meta(6, 2, 3, 3, requires_grad=True), meta(6, requires_grad=True)
    F.conv2d(x, w, b, stride=2, padding=1, groups=2).sum().backward()
    check(x.grad, (2, 4, 9, 9))
    check(w.grad, (6, 2, 3, 3))
    check(b.grad, (6,))
    # the fused row with an output_mask: a left-out gradient is an empty tensor
    gi, gw, gb = _C._convolution_backward(meta(2, 6, 5, 5), meta(2, 4, 9, 9), meta(6, 2, 3, 3), [2, 2], [1, 1],
                                          [1, 1], 2, [1, 0, 1])
    check(gi, (2, 4, 9, 9))
    check(gw, (0,))
    check(gb, (6,))


def test_unfold_and_fold():
    # blocks: ((10 + 2 - 1*2 - 1) // 2 + 1) * ((11 + 2 - 2*1 - 1) // 1 + 1) = 5 * 11 = 55, rows 3 * 3 * 2 = 18
    check(F.unfold(meta(2, 3, 10, 11), (3, 2), dilation=(1, 2), padding=1, stride=(2, 1)), (2, 18, 55), (990, 55, 1))
    # 12 rows = C * 2 * 3 -> C = 2; blocks (6 - 2 + 1) * (7 - 3 + 1) = 25
    check(F.fold(meta(2, 12, 25), (6, 7), (2, 3)), (2, 2, 6, 7), (84, 42, 7, 1))
    with pytest.raises(RuntimeError, match="match the calculated number of sliding blocks"):
        F.fold(meta(2, 12, 20), (6, 7), (2, 3))


# ------------------------------------------------------------------ attention
def test_attention_grouped_query_shapes():
    # query (B, H, L, E), key (B, Hk, S, E), value (B, Hk, S, Ev) -> (B, H, L, Ev)
    q, k, v = meta(2, 8, 5, 16), meta(2, 2, 7, 16), meta(2, 2, 7, 12)
    check(F.scaled_dot_product_attention(q, k, v, enable_gqa=True), (2, 8, 5, 12), (480, 60, 12, 1))
    check(F.scaled_dot_product_attention(q, meta(2, 8, 7, 16), meta(2, 8, 7, 12), is_causal=True), (2, 8, 5, 12))
    mask = ember.empty(5, 7, dtype=ember.bool, device=META)
    check(F.scaled_dot_product_attention(meta(2, 8, 5, 16), meta(2, 8, 7, 16), meta(2, 8, 7, 12), attn_mask=mask),
          (2, 8, 5, 12))


def test_fused_attention_rows_on_meta():
    out, lse = _C._scaled_dot_product_flash_attention_for_cpu(meta(2, 4, 5, 8), meta(2, 4, 7, 8), meta(2, 4, 7, 8))
    check(out, (2, 4, 5, 8), (160, 40, 8, 1))
    check(lse, (2, 4, 5))
    # nanoGPT's layout, a (B, T, H, D) buffer seen as (B, H, T, D): the output keeps that order (torch's strides)
    base = meta(2, 5, 4, 8).transpose(1, 2)
    out, _ = _C._scaled_dot_product_flash_attention_for_cpu(base, base, base)
    check(out, (2, 4, 5, 8), (160, 8, 32, 1))


def test_attention_backward_on_meta():
    q, k, v = (meta(2, 4, 5, 8, requires_grad=True) for _ in range(3))
    F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    for t in (q, k, v):
        check(t.grad, (2, 4, 5, 8))


# ------------------------------------------------------------------ norms, softmax, dropout
def test_norms_statistics_shapes():
    y, mean, rstd = _C._native_layer_norm(meta(2, 3, 8), [3, 8], None, None, 1e-5)
    check(y, (2, 3, 8))
    check(mean, (2, 1, 1))
    check(rstd, (2, 1, 1))
    y, mean, rstd = _C._native_group_norm(meta(2, 6, 5), None, None, 3, 1e-5)
    check(y, (2, 6, 5))
    check(mean, (2, 3))
    check(rstd, (2, 3))
    check(F.rms_norm(meta(4, 6), [6]), (4, 6))
    check(F.group_norm(meta(2, 6, 4, 4), 3, meta(6), meta(6)), (2, 6, 4, 4))
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        F.group_norm(meta(2, 6, 4, 4), 4)


def test_batch_norm_on_meta_returns_meta_and_keeps_its_running_statistics_meta():
    rm, rv = meta(3), meta(3)
    y = F.batch_norm(meta(2, 3, 10, 11), rm, rv, meta(3), meta(3), training=True, momentum=0.1)
    check(y, (2, 3, 10, 11), (330, 110, 11, 1))
    assert rm.is_meta and rv.is_meta and tuple(rm.shape) == (3,)
    check(F.batch_norm(meta(4, 3), rm, rv, training=False), (4, 3))
    with pytest.raises(RuntimeError, match="running_mean should contain 3 elements not 4"):
        F.batch_norm(meta(2, 3, 5), meta(4), meta(3), training=True)
    bn = nn.BatchNorm2d(3, device=META)
    check(bn(meta(2, 3, 4, 4)), (2, 3, 4, 4))
    assert bn.running_mean.is_meta and bn.running_var.is_meta


def test_softmax_family_and_dropout():
    check(F.softmax(meta(3, 4, 5), dim=1), (3, 4, 5))
    check(F.log_softmax(meta(3, 4, 5), dim=-1, dtype=ember.float64), (3, 4, 5), dtype=ember.float64)
    y, mask = _C._native_dropout(meta(4, 5, 6), 0.3, True)
    check(y, (4, 5, 6))
    check(mask, (4, 5, 6), dtype=ember.bool)
    check(F.dropout(meta(4, 5), 0.5, training=True), (4, 5))


def test_embedding_and_one_hot():
    check(F.embedding(index(2, 3), meta(10, 4)), (2, 3, 4), (12, 4, 1))
    check(nn.Embedding(10, 4, device=META)(index(7)), (7, 4))
    check(F.one_hot(index(2, 3), 5), (2, 3, 5), (15, 5, 1), dtype=ember.int64)
    # the class count would come from the values: torch's error on meta
    with pytest.raises(RuntimeError, match="Tensor.item\\(\\) cannot be called on meta tensors"):
        F.one_hot(index(2, 3))


# ------------------------------------------------------------------ losses
@pytest.mark.parametrize("reduction,shape", [("none", (6,)), ("mean", ()), ("sum", ())])
def test_cross_entropy_and_nll_reductions(reduction, shape):
    logits, target = meta(6, 5), index(6)
    check(F.cross_entropy(logits, target, reduction=reduction, ignore_index=2), shape)
    check(F.cross_entropy(logits, target, weight=meta(5), reduction=reduction, label_smoothing=0.1), shape)
    check(F.nll_loss(logits, target, reduction=reduction, ignore_index=-100), shape)


def test_losses_of_spatial_targets_and_their_backward():
    # (N, C, d1, d2) with (N, d1, d2): 'none' keeps the target's shape
    check(F.cross_entropy(meta(2, 5, 3, 4), index(2, 3, 4), reduction="none"), (2, 3, 4), (12, 4, 1))
    check(F.nll_loss(meta(2, 5, 3, 4), index(2, 3, 4), reduction="none"), (2, 3, 4))
    with pytest.raises(ValueError, match="Expected input batch_size \\(6\\) to match target batch_size \\(4\\)"):
        F.cross_entropy(meta(6, 5), index(4))
    x = meta(6, 5, requires_grad=True)
    F.cross_entropy(x, index(6), ignore_index=1).backward()
    check(x.grad, (6, 5))
    p = meta(4, 3, requires_grad=True)
    for loss in (F.mse_loss(p, meta(4, 3)), F.binary_cross_entropy(p, meta(4, 3)), F.smooth_l1_loss(p, meta(4, 3)),
                 F.binary_cross_entropy_with_logits(p, meta(4, 3), pos_weight=meta(3))):
        check(loss, ())
    check(F.mse_loss(p, meta(4, 3), reduction="none"), (4, 3))


# ------------------------------------------------------------------ pools, upsampling
def test_max_pool_ceil_mode():
    x = meta(2, 3, 10, 11)
    # floor((n + 2p - k) / s) + 1, or ceil(...) + 1 when the last window starts inside the padded input:
    #   H: floor(9 / 2) + 1 = 5, ceil: 5 + 1 = 6 (start 10 < 10 + 1); W: 10 / 2 + 1 = 6 either way
    y, i = F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, return_indices=True)
    check(y, (2, 3, 6, 6), (108, 36, 6, 1))
    check(i, (2, 3, 6, 6), dtype=ember.int64)
    y, i = F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=False, return_indices=True)
    check(y, (2, 3, 5, 6), (90, 30, 6, 1))
    # avg (3, 2) stride (2, 3), ceil: H ceil(7 / 2) + 1 = 5, W ceil(9 / 3) + 1 = 4
    check(F.avg_pool2d(x, (3, 2), stride=(2, 3), ceil_mode=True), (2, 3, 5, 4), (60, 20, 4, 1))
    check(F.adaptive_avg_pool2d(x, (4, 3)), (2, 3, 4, 3), (36, 12, 3, 1))
    check(F.adaptive_avg_pool2d(meta(3, 10, 11), 1), (3, 1, 1))


def test_pool_backward_on_meta():
    x = meta(2, 3, 10, 11, requires_grad=True)
    (F.max_pool2d(x, 3, 2, ceil_mode=True).sum() + F.avg_pool2d(x, 2).sum() + F.adaptive_avg_pool2d(x, 3).sum()
     ).backward()
    check(x.grad, (2, 3, 10, 11))


def test_upsampling_shapes():
    x = meta(2, 3, 10, 11)
    # size = floor(n * scale): 15, 22
    check(F.interpolate(x, scale_factor=(1.5, 2), mode="bilinear"), (2, 3, 15, 22), (990, 330, 22, 1))
    check(F.interpolate(x, size=(7, 9), mode="nearest"), (2, 3, 7, 9), (189, 63, 9, 1))
    check(F.interpolate(x, size=(4, 5), mode="bicubic", align_corners=True), (2, 3, 4, 5))
    check(F.interpolate(meta(2, 3, 8), scale_factor=2, mode="linear"), (2, 3, 16))
    check(F.interpolate(meta(2, 3, 8), size=5, mode="nearest-exact"), (2, 3, 5))
    y = meta(2, 3, 4, 5, requires_grad=True)
    F.interpolate(y, scale_factor=2, mode="bilinear").sum().backward()
    check(y.grad, (2, 3, 4, 5))


# ------------------------------------------------------------------ indexing
def test_index_ops_shapes():
    x = meta(4, 5, 6)
    check(ember.gather(x, 1, index(4, 2, 6)), (4, 2, 6), (12, 6, 1))
    check(x.index_select(2, index(3)), (4, 5, 3), (15, 3, 1))
    check(x.take(index(2, 2)), (2, 2), (2, 1))
    check(ember.take_along_dim(x, index(4, 1, 6), dim=1), (4, 1, 6))
    check(x.scatter(1, index(4, 2, 6), meta(4, 2, 6)), (4, 5, 6))
    check(x.scatter_reduce(1, index(4, 2, 6), meta(4, 2, 6), "mean"), (4, 5, 6))
    check(x.index_add(0, index(3), meta(3, 5, 6)), (4, 5, 6))
    check(x.index_fill(1, index(2), 0.5), (4, 5, 6))
    check(x.masked_fill(ember.empty(5, 6, dtype=ember.bool, device=META), 1.0), (4, 5, 6))
    with pytest.raises(RuntimeError, match="Index tensor must have the same number of dimensions as input tensor"):
        ember.gather(x, 1, index(4, 2))


def test_advanced_indexing_with_integer_tensors():
    x = meta(4, 5, 6)
    # P + B + A: the index's shape replaces the indexed dim; non-adjacent index dims go first
    check(x[index(2, 3)], (2, 3, 5, 6), (90, 30, 6, 1))
    check(x[:, index(2), index(2)], (4, 2), (2, 1))
    check(x[index(2), :, index(2)], (2, 5), (5, 1))
    check(x[1:3, index(7)], (2, 7, 6))
    x[index(3)] = meta(3, 5, 6)  # index_put_: shapes checked, nothing written
    with pytest.raises(RuntimeError, match="shape mismatch"):
        x[index(3)] = meta(2, 5, 6)
    check(x.index_put((index(2), index(2)), meta(2, 6)), (4, 5, 6))


def test_boolean_masks_are_data_dependent():
    x, mask = meta(3, 4), ember.empty(3, 4, dtype=ember.bool, device=META)
    nonzero_msg = "The register_meta function for torch.nonzero\\(\\) raises unimplemented by default"
    with pytest.raises(NotImplementedError, match=nonzero_msg):
        x[mask]
    with pytest.raises(NotImplementedError, match=nonzero_msg):
        x[mask[:, 0]]
    # writes through a mask need no count (torch's meta index_put_ / masked_fill)
    x[mask] = 1.0
    assert x.index_put_((mask,), meta(12), accumulate=True) is x
    check(x.masked_scatter(mask, meta(12)), (3, 4))
    # nonzero and argwhere have a meta rule, torch's, which refuses in those words too
    for f in (lambda: ember.nonzero(x), lambda: ember.argwhere(x), lambda: x.nonzero(as_tuple=True)):
        with pytest.raises(NotImplementedError, match=nonzero_msg):
            f()
    # torch's text for an op with no meta kernel
    for name, f in (("masked_select", lambda: x.masked_select(mask)), ("unique", lambda: ember.unique(x)),
                    ("unique_consecutive", lambda: ember.unique_consecutive(x))):
        with pytest.raises(NotImplementedError, match=f"aten::{name}: attempted to run this operator with Meta "
                           "tensors, but there was no fake impl or Meta kernel registered"):
            f()


def test_repeats_and_joins():
    x = meta(4, 5, 6)
    check(x.repeat(2, 1, 1, 3), (2, 4, 5, 18))
    check(x.tile((2, 1)), (4, 10, 6))
    check(ember.repeat_interleave(x, 3, dim=1), (4, 15, 6), (90, 6, 1))
    check(ember.repeat_interleave(x, index(5), dim=1, output_size=9), (4, 9, 6), (54, 6, 1))
    with pytest.raises(RuntimeError, match="cannot repeat_interleave a meta tensor without output_size"):
        ember.repeat_interleave(x, index(5), dim=1)
    check(ember.flip(x, (0, 2)), (4, 5, 6))
    check(ember.roll(x, (1, -2), (0, 2)), (4, 5, 6))
    check(ember.rot90(x, 1, (1, 2)), (4, 6, 5))
    check(ember.diff(x, n=2, dim=1), (4, 3, 6))
    check(ember.hstack([meta(2, 3), meta(2, 4)]), (2, 7))
    check(ember.vstack([meta(3), meta(3)]), (2, 3))
    check(ember.dstack([meta(2, 3), meta(2, 3)]), (2, 3, 2))
    check(ember.column_stack([meta(3), meta(3, 2)]), (3, 3))
    a, b = ember.broadcast_tensors(meta(3, 1), meta(1, 4))
    check(a, (3, 4))
    check(b, (3, 4))
    g1, g2 = ember.meshgrid(meta(3), meta(4), indexing="ij")
    check(g1, (3, 4))
    check(meta(12).reshape_as(meta(3, 4)), (3, 4))
    check(ember.broadcast_to(meta(4, 1), (2, 4, 3)), (2, 4, 3))


# ------------------------------------------------------------------ sort family
def test_sort_family_shapes_and_dtypes():
    x = meta(4, 9)
    v, i = x.topk(3, dim=1)
    check(v, (4, 3), (3, 1))
    check(i, (4, 3), (3, 1), dtype=ember.int64)
    v, i = x.kthvalue(2, dim=0)
    check(v, (9,))
    check(i, (9,), dtype=ember.int64)
    v, i = x.median(dim=1, keepdim=True)
    check(v, (4, 1))
    check(i, (4, 1), dtype=ember.int64)
    check(x.median(), ())
    v, i = x.sort(dim=0, descending=True)
    check(v, (4, 9))
    check(x.argsort(dim=1), (4, 9), dtype=ember.int64)
    check(x.msort(), (4, 9))
    for v, i in (x.cummax(1), x.cummin(0), x.mode(1), x.nanmedian(0)):
        assert v.is_meta and i.is_meta and i.dtype == ember.int64
    check(x.cumsum(1, dtype=ember.float64), (4, 9), dtype=ember.float64)
    check(index(4, 9).cumprod(0), (4, 9), dtype=ember.int64)
    check(ember.searchsorted(meta(3, 5), meta(3, 4)), (3, 4), (4, 1), dtype=ember.int64)
    check(ember.searchsorted(meta(5), meta(2, 7), out_int32=True), (2, 7), dtype=ember.int32)
    check(ember.bucketize(meta(2, 7), meta(5)), (2, 7), dtype=ember.int64)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        x.topk(10, dim=1)


def test_integer_nansum():
    # integers have no NaNs to zero: the sum's shape, in int64
    check(ember.nansum(index(3, 4), 1), (3,), dtype=ember.int64)
    check(ember.nansum(ember.empty(3, 4, dtype=ember.int32, device=META)), (), dtype=ember.int64)


# ------------------------------------------------------------------ products
def test_vector_products():
    check(ember.mv(meta(3, 4), meta(4)), (3,))
    check(ember.dot(meta(4), meta(4)), ())
    check(ember.vdot(meta(4), meta(4)), ())
    check(ember.trace(meta(3, 5)), ())
    check(ember.addr(meta(3, 4), meta(3), meta(4)), (3, 4), (4, 1))
    check(ember.addmv(meta(3), meta(3, 4), meta(4)), (3,))
    check(ember.inner(meta(2, 3, 4), meta(5, 4)), (2, 3, 5), (15, 5, 1))
    check(ember.kron(meta(2, 3), meta(4, 5)), (8, 15), (15, 1))
    check(ember.einsum("bij,bjk->bik", meta(2, 3, 4), meta(2, 4, 5)), (2, 3, 5), (15, 5, 1))
    check(ember.einsum("ii", meta(3, 3)), ())
    with pytest.raises(RuntimeError, match="inconsistent tensor size"):
        ember.dot(meta(4), meta(5))


def test_the_rows_without_a_meta_rule_are_the_data_dependent_ones():
    # what they return is sized by values (torch's meta backend raises for them too; nonzero's
    # meta rule is the refusal), and the fused optimizer steps, which update real parameters
    runs = {n for n in _C._op_names() if {"meta", "any"} & set(_C._op_info(n)["devices"])}
    assert set(_C._op_names()) - runs == {"masked_select", "unique", "unique_consecutive",
                                          "_fused_adam_", "_fused_adamw_"}


def test_sampling_and_foreach_rows():
    check(ember.multinomial(meta(3, 5), 4, replacement=True), (3, 4), dtype=ember.int64)
    check(ember.multinomial(meta(5), 2), (2,), dtype=ember.int64)
    with pytest.raises(RuntimeError, match="cannot sample n_sample > prob_dist.size\\(-1\\) samples without replacement"):
        ember.multinomial(meta(5), 6)
    norms = _C._foreach_norm([meta(3, 4), meta(5)])
    assert len(norms) == 2
    for n in norms:
        check(n, ())
    ts = [meta(3), meta(2, 2)]
    _C._foreach_mul_(ts, 0.5)
    check(ts[1], (2, 2))


def test_backward_formulas_that_branch_on_values_take_their_general_form_on_meta():
    # prod / cumprod test for zeros on the CPU; on meta the zero-safe formula gives the shapes
    for f in (lambda x: x.prod(1), lambda x: x.prod(), lambda x: x.cumprod(0)):
        x = meta(3, 4, requires_grad=True)
        f(x).sum().backward()
        check(x.grad, (3, 4))
    # einsum's diagonal gradient is scattered into zeros made on the gradient's device
    x = meta(3, 3, requires_grad=True)
    ember.einsum("ii->i", x).sum().backward()
    check(x.grad, (3, 3))
    # a 0-d meta value is never read
    x = meta(3, 4, requires_grad=True)
    value = ember.empty((), device=META, requires_grad=True)
    y = x.masked_fill(ember.empty(3, 4, dtype=ember.bool, device=META), value) + x.index_fill(1, index(2), value)
    y.sum().backward()
    check(x.grad, (3, 4))
    check(value.grad, ())


# ------------------------------------------------------------------ Python conversions
def test_truth_value_and_numbers_of_meta_tensors():
    one = meta(1)
    for f in (bool, int, float, complex):
        with pytest.raises(RuntimeError, match="Tensor.item\\(\\) cannot be called on meta tensors"):
            f(one)
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value is ambiguous"):
        if meta(2):
            pass
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with no values is ambiguous"):
        bool(meta(0))
    with pytest.raises(ValueError, match="only one element tensors can be converted to Python scalars"):
        int(meta(3))


# ------------------------------------------------------------------ small models
class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        return self.fc(self.pool(F.relu(self.bn(self.conv(x)))).flatten(1))


class Block(nn.Module):
    def __init__(self, d=16, heads=4, vocab=11):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.mha = nn.MultiheadAttention(d, heads, batch_first=True)
        self.qkv = nn.Linear(d, 3 * d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.head = nn.Linear(d, vocab)
        self.heads = heads

    def forward(self, x):
        y = self.ln1(x)
        x = x + self.mha(y, y, y)[0]
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2)
                   for t in self.qkv(self.ln2(x)).split(C, dim=-1))
        x = x + F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + self.down(F.gelu(self.up(x)))
        return self.head(x)


@pytest.mark.parametrize("make,shape,out", [(ConvNet, (2, 3, 8, 8), (2, 10)), (Block, (2, 5, 16), (2, 5, 11))])
def test_small_models_run_forward_and_backward_on_meta(make, shape, out):
    with ember.device(META):
        model = make()
    assert all(p.is_meta for p in model.parameters())
    y = model(meta(*shape))
    check(y, out)
    check(F.softmax(y, dim=-1), out)
    logits = y.reshape(-1, y.shape[-1])
    loss = F.cross_entropy(logits, index(logits.shape[0]))
    check(loss, ())
    loss.backward()
    for p in model.parameters():
        assert p.grad is not None and p.grad.is_meta and tuple(p.grad.shape) == tuple(p.shape)
