"""Adam (torch.optim.Adam's documented algorithm), with AMSGrad, maximize
and L2 or decoupled (AdamW) weight decay. State per parameter: 'step' (a 0-d
float32 tensor), 'exp_avg', 'exp_avg_sq' and, with amsgrad, 'max_exp_avg_sq'.

On the CPU the update runs in one fused C pass per parameter
(`_C._fused_adam_` / `_C._fused_adamw_`, csrc/ops/optim.c) unless fused=False
or foreach=False is asked for, or a parameter's tensors are not contiguous
floating tensors of one dtype; those take the op-by-op path, which is
torch's single-tensor algorithm written with ember ops.
"""
from .. import _C
from ._common import _new_step, _step_body, _value
from .optimizer import Optimizer, _check_hyper

__all__ = ["Adam"]


def _fusable(p, grad, state, amsgrad):
    ts = [p, grad, state["exp_avg"], state["exp_avg_sq"]] + ([state["max_exp_avg_sq"]] if amsgrad else [])
    return (p.is_floating_point() and p.device.type in ("cpu", "cuda") and
            all(t.dtype == p.dtype and t.shape == p.shape and t.is_contiguous() for t in ts))


class Adam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        _check_hyper(_value(lr) >= 0.0, "learning rate", lr)
        _check_hyper(eps >= 0.0, "epsilon value", eps)
        _check_hyper(0.0 <= _value(betas[0]) < 1.0, "beta parameter at index 0", betas[0])
        _check_hyper(0.0 <= _value(betas[1]) < 1.0, "beta parameter at index 1", betas[1])
        _check_hyper(weight_decay >= 0.0, "weight_decay value", weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable, differentiable=differentiable,
                        fused=fused, decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)
        if fused:
            if differentiable:
                raise RuntimeError("`fused` does not support `differentiable`")
            if foreach:
                raise RuntimeError("`fused` and `foreach` cannot be `True` together.")

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for key, value in (("amsgrad", False), ("maximize", False), ("foreach", None),
                               ("capturable", False), ("differentiable", False), ("fused", None),
                               ("decoupled_weight_decay", False)):
                group.setdefault(key, value)
            for p in group["params"]:
                st = self.state.get(p, {})
                if st and not isinstance(st["step"], _C.Tensor):
                    st["step"] = _C.tensor(float(st["step"]), dtype=_new_step().dtype)

    def _init_state(self, p, amsgrad):
        state = self.state[p]
        if len(state) == 0:
            state["step"] = _new_step()
            state["exp_avg"] = _C.zeros_like(p)
            state["exp_avg_sq"] = _C.zeros_like(p)
            if amsgrad:
                state["max_exp_avg_sq"] = _C.zeros_like(p)
        return state

    @_step_body
    def step(self):
        for group in self.param_groups:
            amsgrad = group["amsgrad"]
            use_fused = group["fused"] is not False and group["foreach"] is not False and \
                not group["differentiable"]
            fused = [[], [], [], [], [], []]  # params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self._init_state(p, amsgrad)
                state["step"] += 1
                if use_fused and _fusable(p, p.grad, state, amsgrad):
                    for lst, t in zip(fused, (p, p.grad, state["exp_avg"], state["exp_avg_sq"],
                                              state.get("max_exp_avg_sq"), state["step"])):
                        if t is not None:
                            lst.append(t)
                else:
                    self._single_step(group, p, state)
            if fused[0]:
                beta1, beta2 = group["betas"]
                kernel = _C._fused_adamw_ if group["decoupled_weight_decay"] else _C._fused_adam_
                kernel(*fused, lr=float(_value(group["lr"])), beta1=float(_value(beta1)),
                       beta2=float(_value(beta2)), weight_decay=float(group["weight_decay"]),
                       eps=float(group["eps"]), maximize=bool(group["maximize"]))

    @staticmethod
    def _single_step(group, p, state):
        """torch's single-tensor Adam for one parameter (its step already counted)."""
        lr, (beta1, beta2) = _value(group["lr"]), group["betas"]
        beta1, beta2 = _value(beta1), _value(beta2)
        wd, eps = group["weight_decay"], group["eps"]
        grad = -p.grad if group["maximize"] else p.grad
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        if wd != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * wd)
            else:
                grad = grad.add(p, alpha=wd)
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        step = state["step"].item()
        step_size = lr / (1 - beta1 ** step)
        bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
        if group["amsgrad"]:
            vmax = state["max_exp_avg_sq"]
            _C.maximum(vmax, exp_avg_sq, out=vmax)
            denom = (vmax.sqrt() / bias_correction2_sqrt).add_(eps)
        else:
            denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
        p.addcdiv_(exp_avg, denom, value=-step_size)
