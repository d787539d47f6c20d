"""Autograd functions behind modules: SyncBatchNorm's statistics taken across
the ranks of a process group.

Forward: each rank sums its per-channel x and x^2 and counts its elements;
one all_reduce makes them global, so every rank normalizes by the whole
batch's mean and (biased) variance; the running statistics take the
unbiased variance of the whole batch, as torch's. Backward: the gradient of
the input needs the global per-channel sums of dy and dy*(x-mean) (a second
all_reduce); the weight's and bias's gradients stay local, for DDP to
average like any other gradient — torch's split too."""
import ember

from ... import distributed as dist


def _channel_sums(t):
    """t (N, C, *) -> (C,) sums over every dim but the channels"""
    dims = [0] + list(range(2, t.dim()))
    return t.sum(dim=dims)


def _per_channel(v, ndim):
    return v.reshape([1, -1] + [1] * (ndim - 2))


class SyncBatchNorm(ember.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, eps, momentum, process_group, world_size):
        c = input.shape[1]
        count = input.numel() // c
        acc = ember.float64 if input.dtype == ember.float64 else ember.float32
        x = input.to(acc)
        stats = ember.cat([_channel_sums(x), _channel_sums(x * x),
                           ember.full((1,), float(count), dtype=acc)])
        dist.all_reduce(stats, group=process_group)
        total = float(stats[2 * c].item())
        if total <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"{list(input.shape)} across {world_size} processes")
        mean = stats[:c] / total
        var = (stats[c:2 * c] / total - mean * mean).clamp_min(0)
        invstd = (var + eps).rsqrt()
        if running_mean is not None:
            with ember.no_grad():
                running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype) * momentum)
                running_var.mul_(1 - momentum).add_((var * (total / (total - 1))).to(running_var.dtype) * momentum)
        xhat = (x - _per_channel(mean, x.dim())) * _per_channel(invstd, x.dim())
        out = xhat
        if weight is not None:
            out = out * _per_channel(weight.to(acc), x.dim())
        if bias is not None:
            out = out + _per_channel(bias.to(acc), x.dim())
        ctx.save_for_backward(xhat, invstd, weight)
        ctx.total, ctx.group, ctx.has_bias = total, process_group, bias is not None
        ctx.in_dtype = input.dtype
        return out.to(input.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        xhat, invstd, weight = ctx.saved_tensors
        g = grad_output.to(xhat.dtype)
        c = xhat.shape[1]
        sum_dy = _channel_sums(g)
        sum_dy_xhat = _channel_sums(g * xhat)
        grad_weight = sum_dy_xhat.to(weight.dtype) if weight is not None else None
        grad_bias = sum_dy.to(weight.dtype if weight is not None else g.dtype) if ctx.has_bias else None
        grad_input = None
        if ctx.needs_input_grad[0]:
            both = ember.cat([sum_dy, sum_dy_xhat])
            dist.all_reduce(both, group=ctx.group)
            mean_dy = both[:c] / ctx.total
            mean_dy_xhat = both[c:] / ctx.total
            scale = invstd if weight is None else invstd * weight.to(g.dtype)
            nd = g.dim()
            grad_input = (_per_channel(scale, nd) * (g - _per_channel(mean_dy, nd)
                                                      - xhat * _per_channel(mean_dy_xhat, nd))).to(ctx.in_dtype)
        return grad_input, grad_weight, grad_bias, None, None, None, None, None, None
