"""Folding an eval-mode BatchNorm into the convolution or linear layer before
it: y = gamma * (W x + b - mean) / sqrt(var + eps) + beta is one affine layer
with W' = W * gamma / sqrt(var + eps) (per output channel) and
b' = (b - mean) * gamma / sqrt(var + eps) + beta."""
import copy

from ... import _C
from ..parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]


def _check_eval(module, bn, what):
    if module.training or bn.training:
        raise AssertionError(f"Fusion only for eval! ({what} and BatchNorm must both be in eval mode)")


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A copy of conv with eval-mode bn folded into its weight and bias."""
    _check_eval(conv, bn, "Conv")
    fused = copy.deepcopy(conv)
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("fuse_conv_bn_eval: the BatchNorm has no running statistics")
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                    bn.eps, bn.weight, bn.bias, transpose)
    return fused


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """(fused weight, fused bias) as Parameters. The output-channel axis of the
    weight is 0, or 1 for a transposed convolution."""
    conv_weight_dtype = conv_w.dtype
    conv_bias_dtype = conv_b.dtype if conv_b is not None else conv_weight_dtype
    if conv_b is None:
        conv_b = _C.zeros_like(bn_rm)
    if bn_w is None:
        bn_w = _C.ones_like(bn_rm)
    if bn_b is None:
        bn_b = _C.zeros_like(bn_rm)
    bn_var_rsqrt = _C.rsqrt(bn_rv + bn_eps)
    shape = [1] * conv_w.dim()
    shape[1 if transpose else 0] = -1
    scale = (bn_w * bn_var_rsqrt).reshape(shape)
    fused_w = (conv_w * scale).to(dtype=conv_weight_dtype)
    fused_b = ((conv_b - bn_rm) * bn_var_rsqrt * bn_w + bn_b).to(dtype=conv_bias_dtype)
    return Parameter(fused_w, conv_w.requires_grad), Parameter(fused_b, conv_b.requires_grad)


def fuse_linear_bn_eval(linear, bn):
    """A copy of linear with the eval-mode BatchNorm1d after it folded in."""
    _check_eval(linear, bn, "Linear")
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise AssertionError("To fuse, linear.out_features == bn.num_features or bn.num_features == 1")
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("fuse_linear_bn_eval: the BatchNorm has no running statistics")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                      bn.eps, bn.weight, bn.bias)
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    if linear_b is None:
        linear_b = _C.zeros_like(bn_rm)
    if bn_w is None:
        bn_w = _C.ones_like(bn_rm)
    if bn_b is None:
        bn_b = _C.zeros_like(bn_rm)
    bn_scale = bn_w * _C.rsqrt(bn_rv + bn_eps)
    fused_w = linear_w * bn_scale.unsqueeze(-1)
    fused_b = (linear_b - bn_rm) * bn_scale + bn_b
    return Parameter(fused_w, linear_w.requires_grad), Parameter(fused_b, linear_b.requires_grad)
