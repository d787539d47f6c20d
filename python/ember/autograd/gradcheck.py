"""gradcheck / gradgradcheck: compare autograd's gradients with central
finite differences, with torch's defaults (eps=1e-6, atol=1e-5, rtol=1e-3)."""
from .._lazy import numpy as np

from .. import _C


class GradcheckError(RuntimeError):
    pass


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,) if not isinstance(x, list) else tuple(x)


def _outputs(func, inputs):
    out = _as_tuple(func(*inputs))
    return tuple(o for o in out if isinstance(o, _C.Tensor) and o.dtype.is_floating_point)


def _numerical(func, inputs, i, eps):
    """d outputs / d inputs[i], one column per element of inputs[i]."""
    x = inputs[i]
    xd = x.detach()  # shares memory: perturb the input in place
    cols = []
    for idx in np.ndindex(*x.shape):
        orig = xd[idx].item()
        xd[idx] = orig + eps
        plus = [o.detach().double().cpu().numpy().ravel().copy() for o in _outputs(func, inputs)]
        xd[idx] = orig - eps
        minus = [o.detach().double().cpu().numpy().ravel().copy() for o in _outputs(func, inputs)]
        xd[idx] = orig
        cols.append([(p - m) / (2 * eps) for p, m in zip(plus, minus)])
    return cols  # cols[element][output] -> vector over output elements


def _analytical(outputs, inputs, i):
    """rows[output][output element] -> gradient w.r.t. inputs[i] (flattened)."""
    from . import grad
    rows = []
    for o in outputs:
        per_elem = []
        for k in range(o.numel()):
            go = _C.zeros(o.shape, dtype=o.dtype, device=o.device)
            go.view(-1)[k] = 1.0
            g = grad((o,), (inputs[i],), (go,), retain_graph=True, allow_unused=True)[0]
            per_elem.append(np.zeros(inputs[i].numel()) if g is None else g.detach().double().cpu().numpy().ravel())
        rows.append(per_elem)
    return rows


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
              check_batched_forward_grad=False, check_forward_ad=False, check_backward_ad=True,
              fast_mode=False, masked=None):
    """True when the analytical Jacobian of func at inputs matches finite differences."""
    inputs = _as_tuple(inputs)
    diff = [i for i, x in enumerate(inputs) if isinstance(x, _C.Tensor) and x.requires_grad]
    if not diff:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of "
                         "the them have requires_grad=True.")
    # analytical first: perturbing the inputs in place bumps their version,
    # which would invalidate a graph built before (Note [version counter])
    outputs = _outputs(func, inputs)
    analyticals = {i: _analytical(outputs, inputs, i) for i in diff}
    for i in diff:
        num = _numerical(func, inputs, i, eps)
        ana = analyticals[i]
        for j, o in enumerate(outputs):
            n_in = inputs[i].numel()
            numerical = np.array([num[e][j] for e in range(len(num))]).T.reshape(o.numel(), n_in) \
                if num and o.numel() else np.zeros((o.numel(), n_in))
            analytical = np.array(ana[j]).reshape(o.numel(), n_in) if o.numel() else np.zeros((0, n_in))
            if not np.allclose(analytical, numerical, rtol=rtol, atol=atol):
                if not raise_exception:
                    return False
                raise GradcheckError(f"Jacobian mismatch for output {j} with respect to input {i},\n"
                                     f"numerical:{numerical}\nanalytical:{analytical}\n")
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False, masked=False):
    """gradcheck of the gradients: second derivatives against finite differences."""
    from . import grad
    inputs = _as_tuple(inputs)
    outputs = _outputs(func, inputs)
    if grad_outputs is None:
        g = _C.Generator().manual_seed(0)
        grad_outputs = tuple(_C.randn(o.shape, dtype=o.dtype, generator=g).requires_grad_() for o in outputs)
    grad_outputs = _as_tuple(grad_outputs)
    n_in = len(inputs)

    def first_grads(*args):
        ins, gos = args[:n_in], args[n_in:]
        outs = _outputs(func, ins)
        d = [x for x in ins if isinstance(x, _C.Tensor) and x.requires_grad]
        gs = grad(outs, d, gos, create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_grads, inputs + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
