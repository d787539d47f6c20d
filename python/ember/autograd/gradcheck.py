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
    return tuple(o for o in out if isinstance(o, _C.Tensor) and (o.dtype.is_floating_point or o.dtype.is_complex))


# Note [complex gradcheck]: a complex number is two real degrees of freedom,
# so complex inputs and outputs are checked as real ones: the Jacobian of
# (real, imag) of every output element with respect to (real, imag) of every
# input element. Numerically: perturb x by eps and by eps*1j. Analytically,
# by torch's convention (the gradient is dL/dx + i dL/dy): the gradient for
# grad_output 1 at an output element is d(real)/dx + i d(real)/dy, and for
# grad_output 1j it is d(imag)/dx + i d(imag)/dy.

def _real_values(t):
    """A tensor's values as float64 reals: (real, imag) pairs for complex."""
    t = t.detach().cpu()
    if t.dtype.is_complex:
        return t.to(_C._dtypes["complex128"]).numpy().reshape(-1).view(np.float64).copy()
    return t.double().numpy().ravel().copy()


def _numerical(func, inputs, i, eps):
    """d outputs / d inputs[i]: a column per real degree of freedom of inputs[i]."""
    x = inputs[i]
    xd = x.detach()  # shares memory: perturb the input in place
    steps = (eps, eps * 1j) if x.dtype.is_complex else (eps,)
    cols = []
    for idx in np.ndindex(*x.shape):
        orig = xd[idx].item()
        for h in steps:
            xd[idx] = orig + h
            plus = [_real_values(o) for o in _outputs(func, inputs)]
            xd[idx] = orig - h
            minus = [_real_values(o) for o in _outputs(func, inputs)]
            xd[idx] = orig
            cols.append([(p - m) / (2 * eps) for p, m in zip(plus, minus)])
    return cols  # cols[input dof][output] -> vector over output dofs


def _analytical(outputs, inputs, i):
    """rows[output][output dof] -> gradient w.r.t. inputs[i] (flattened real dofs)."""
    from . import grad
    x = inputs[i]
    n_dof = x.numel() * (2 if x.dtype.is_complex else 1)
    rows = []
    for o in outputs:
        per_elem = []
        units = (1.0, 1j) if o.dtype.is_complex else (1.0,)
        for k in range(o.numel()):
            for u in units:
                go = _C.zeros(o.shape, dtype=o.dtype, device=o.device)
                go.view(-1)[k] = u
                g = grad((o,), (x,), (go,), retain_graph=True, allow_unused=True)[0]
                per_elem.append(np.zeros(n_dof) if g is None else _real_values(g))
        rows.append(per_elem)
    return rows


def _dofs(t):
    return t.numel() * (2 if t.dtype.is_complex else 1)


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
              check_batched_forward_grad=False, check_forward_ad=False, check_backward_ad=True,
              fast_mode=False, masked=None):
    """True when the analytical Jacobian of func at inputs matches finite differences
    (complex inputs and outputs as pairs of reals: Note [complex gradcheck])."""
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
            n_in, n_out = _dofs(inputs[i]), _dofs(o)
            numerical = np.array([num[e][j] for e in range(len(num))]).T.reshape(n_out, n_in) \
                if num and n_out else np.zeros((n_out, n_in))
            analytical = np.array(ana[j]).reshape(n_out, n_in) if n_out else np.zeros((0, n_in))
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
