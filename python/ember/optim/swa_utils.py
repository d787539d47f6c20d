"""ember.optim.swa_utils: stochastic weight averaging and exponential moving
averages of a model's weights (torch.optim.swa_utils): AveragedModel, the
averaging functions, SWALR (anneal the lr to a constant SWA lr) and update_bn
(recompute BatchNorm statistics for the averaged weights).
"""
import copy
import itertools
import math

from .. import _C
from ..autograd.grad_mode import no_grad
from ..nn.modules.batchnorm import _BatchNorm
from ..nn.modules.module import Module
from .lr_scheduler import LRScheduler, _per_group

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn",
           "get_ema_avg_fn", "get_swa_avg_fn"]


def _lerp_list_(averaged, current, weight):
    """averaged[i] += weight * (current[i] - averaged[i]), in place (weight: a number or 0-d tensor)."""
    for a, c in zip(averaged, current):
        a.lerp_(c, weight if not isinstance(weight, _C.Tensor) else weight.to(a.dtype))


def get_ema_multi_avg_fn(decay=0.999):
    """An in-place update of lists of tensors: ema = decay * ema + (1 - decay) * current."""
    def ema_update(ema_param_list, current_param_list, _):
        with no_grad():
            if ema_param_list[0].dtype.is_floating_point:
                _lerp_list_(ema_param_list, current_param_list, 1 - decay)
            else:
                for p_ema, p_model in zip(ema_param_list, current_param_list):
                    p_ema.copy_(p_ema * decay + p_model * (1 - decay))
    return ema_update


def get_swa_multi_avg_fn():
    """An in-place update of lists of tensors to the running mean over num_averaged + 1 models."""
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        with no_grad():
            if averaged_param_list[0].dtype.is_floating_point:
                _lerp_list_(averaged_param_list, current_param_list, 1 / (num_averaged + 1))
            else:
                for a, c in zip(averaged_param_list, current_param_list):  # copy_ truncates to the int dtype
                    a.copy_(a + (c - a) / (num_averaged + 1))
    return swa_update


def get_ema_avg_fn(decay=0.999):
    """avg_fn(ema, current, num_averaged) -> decay * ema + (1 - decay) * current."""
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    """avg_fn(avg, current, num_averaged) -> the running mean including current."""
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


class AveragedModel(Module):
    """A copy of `model` whose parameters (and buffers, with use_buffers=True)
    are a running average of the model's: the equal-weight mean by default
    (SWA), or whatever avg_fn (per tensor) / multi_avg_fn (per list, in place)
    computes, e.g. an EMA. update_parameters(model) folds in the model's
    current weights; n_averaged counts them."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", _C.tensor(0, dtype=_C._dtypes["int64"], device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model):
        self_param = (itertools.chain(self.module.parameters(), self.module.buffers()) if self.use_buffers
                      else self.parameters())
        model_param = (itertools.chain(model.parameters(), model.buffers()) if self.use_buffers
                       else model.parameters())
        averaged, current = [], []
        first = int(self.n_averaged.item()) == 0
        for p_averaged, p_model in zip(self_param, model_param):
            p_model_ = p_model.detach().to(p_averaged.device)
            averaged.append(p_averaged.detach())
            current.append(p_model_)
            if first:
                with no_grad():
                    p_averaged.detach().copy_(p_model_)
        if not first and averaged:
            if self.avg_fn is None:
                # grouped by device and dtype, as multi_avg_fn implementations expect
                groups = {}
                for a, c in zip(averaged, current):
                    groups.setdefault((str(a.device), str(a.dtype)), ([], []))
                    groups[(str(a.device), str(a.dtype))][0].append(a)
                    groups[(str(a.device), str(a.dtype))][1].append(c)
                for (dev, _), (a_list, c_list) in groups.items():
                    n_averaged = self.n_averaged.to(dev)
                    if self.multi_avg_fn is not None:
                        self.multi_avg_fn(a_list, c_list, n_averaged)
                    elif not dev.startswith("cpu"):
                        get_swa_multi_avg_fn()(a_list, c_list, n_averaged)
                    else:  # torch's CPU path: the per-tensor formula (its lerp is for foreach devices)
                        swa = get_swa_avg_fn()
                        with no_grad():
                            for a, c in zip(a_list, c_list):
                                a.copy_(swa(a, c, n_averaged))
            else:
                with no_grad():
                    for a, c in zip(averaged, current):
                        a.copy_(self.avg_fn(a, c, self.n_averaged.to(a.device)))
        if not self.use_buffers:
            # buffers (BatchNorm statistics) are not averaged: keep the model's
            with no_grad():
                for b_swa, b_model in zip(self.module.buffers(), model.buffers()):
                    b_swa.detach().copy_(b_model.detach().to(b_swa.device))
        with no_grad():
            self.n_averaged.add_(1)


def update_bn(loader, model, device=None):
    """One pass over loader (batches, or (input, ...) tuples whose first item is
    the input) in training mode to recompute every BatchNorm's running
    statistics as plain averages over the data (momentum None meanwhile)."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for input in loader:
        if isinstance(input, (list, tuple)):
            input = input[0]
        if device is not None:
            input = input.to(device)
        model(input)
    for bn_module in momenta:
        bn_module.momentum = momenta[bn_module]
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's lr to its swa_lr over anneal_epochs steps (cosine or
    linear), then holds it there."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        swa_lrs = _per_group("swa_lr", optimizer, swa_lr)
        for lr, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = lr.clone() if isinstance(lr, _C.Tensor) else lr
        if anneal_strategy not in ["cos", "linear"]:
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal

    def get_lr(self):
        self._warn_if_outside_step()
        # the lr before annealing is recovered from the current one, so user
        # edits of group['lr'] carry on (torch's chainable form)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        prev_lrs = [self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha)
                    for group in self.optimizer.param_groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [group["swa_lr"] * alpha + lr * (1 - alpha) for group, lr in zip(self.optimizer.param_groups, prev_lrs)]

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
