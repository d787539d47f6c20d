"""The Optimizer base class, as torch.optim.Optimizer users know it.

An optimizer holds `param_groups` (a list of dicts: 'params' and the
hyperparameters, which users edit between steps, e.g. g['lr'] = 0.01),
`defaults` (the hyperparameters a group gets when it names none) and `state`
(a defaultdict keyed by the parameter tensor itself; ember tensors hash by
identity, like torch's). `state_dict()` uses torch's layout, parameters
replaced by their index in group order, so a state dict saved by torch loads
here and the other way round.
"""
import warnings
from collections import OrderedDict, defaultdict
from copy import deepcopy
from itertools import chain

from .. import _C

Tensor = _C.Tensor

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """Marks a hyperparameter a param group must give (torch.optim.optimizer.required)."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()

# hooks run around every optimizer's step (register_optimizer_step_*_hook)
_global_step_pre_hooks = OrderedDict()
_global_step_post_hooks = OrderedDict()


class _RemovableHandle:
    """What the register_*_hook functions return: .remove() takes the hook out."""
    _next_id = 0

    def __init__(self, hooks):
        self._hooks = hooks
        self.id = _RemovableHandle._next_id
        _RemovableHandle._next_id += 1

    def remove(self):
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _add_hook(hooks, hook):
    handle = _RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def register_optimizer_step_pre_hook(hook):
    """hook(optimizer, args, kwargs) before every optimizer's step."""
    return _add_hook(_global_step_pre_hooks, hook)


def register_optimizer_step_post_hook(hook):
    """hook(optimizer, args, kwargs) after every optimizer's step."""
    return _add_hook(_global_step_post_hooks, hook)


def _with_step_hooks(step):
    """Wrap a subclass's step so that the pre/post hooks run around it."""
    def wrapper(self, *args, **kwargs):
        pre_hooks = getattr(self, "_optimizer_step_pre_hooks", None)
        if pre_hooks is None:
            # a subclass that skips Optimizer.__init__ (accelerate's AcceleratedOptimizer wraps
            # another optimizer and forwards step to it): torch patches step in __init__, so
            # such an instance's step runs without hooks; the wrapped optimizer's still run
            out = step(self, *args, **kwargs)
            self._opt_called = True
            return out
        for hook in chain(_global_step_pre_hooks.values(), pre_hooks.values()):
            result = hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(
                        f"{hook} must return None or a tuple of (new_args, new_kwargs), but got {result}.")
                args, kwargs = result
        out = step(self, *args, **kwargs)
        self._opt_called = True
        for hook in chain(self._optimizer_step_post_hooks.values(), _global_step_post_hooks.values()):
            hook(self, args, kwargs)
        return out
    wrapper.__wrapped__ = step
    wrapper.__name__, wrapper.__qualname__, wrapper.__doc__ = step.__name__, step.__qualname__, step.__doc__
    wrapper._hooked = True
    return wrapper


def _typename(obj):
    if isinstance(obj, Tensor):
        return "ember.Tensor"
    return type(obj).__module__ + "." + type(obj).__qualname__ if type(obj).__module__ != "builtins" \
        else type(obj).__qualname__


def _check_hyper(ok, what, value):
    """torch's ValueError for a bad hyperparameter: "Invalid learning rate: -1"."""
    if not ok:
        raise ValueError(f"Invalid {what}: {value}")


class Optimizer:
    """Base class of all optimizers. `params`: an iterable of tensors, or of
    dicts (param groups) with a 'params' entry and per-group options."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_hooked", False):
            cls.step = _with_step_hooks(step)

    def __init__(self, params, defaults):
        self.defaults = defaults
        self._optimizer_step_pre_hooks = OrderedDict()
        self._optimizer_step_post_hooks = OrderedDict()
        self._optimizer_state_dict_pre_hooks = OrderedDict()
        self._optimizer_state_dict_post_hooks = OrderedDict()
        self._optimizer_load_state_dict_pre_hooks = OrderedDict()
        self._optimizer_load_state_dict_post_hooks = OrderedDict()
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {_typename(params)}")
        self.state = defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    # -- pickling and printing ------------------------------------------
    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
        for name in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks",
                     "_optimizer_state_dict_pre_hooks", "_optimizer_state_dict_post_hooks",
                     "_optimizer_load_state_dict_pre_hooks", "_optimizer_load_state_dict_post_hooks"):
            if name not in self.__dict__:
                setattr(self, name, OrderedDict())

    def __repr__(self):
        lines = [self.__class__.__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(group):
                if key != "params":
                    lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)

    # -- groups ---------------------------------------------------------
    def add_param_group(self, param_group):
        """Add a group (a dict with 'params') to param_groups; the options it
        does not give come from `defaults`."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the "
                            "ordering of tensors in sets will change between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)
        for param in param_group["params"]:
            if not isinstance(param, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {_typename(param)}")
            if not self.defaults.get("differentiable", None) and not (param.is_leaf or param.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)
        params = param_group["params"]
        if len(params) != len(set(params)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will "
                          "cause an error; see github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        seen = set()
        for group in self.param_groups:
            seen.update(group["params"])
        if not seen.isdisjoint(params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    # -- gradients ------------------------------------------------------
    def zero_grad(self, set_to_none=True):
        """Reset every parameter's .grad: to None (the default), or to zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if p.grad.grad_fn is not None:
                        p.grad.detach_()
                    else:
                        p.grad.requires_grad_(False)
                    p.grad.zero_()

    def step(self, closure=None):
        """One optimization step (subclasses implement it)."""
        raise NotImplementedError

    # -- hooks ----------------------------------------------------------
    def register_step_pre_hook(self, hook):
        """hook(optimizer, args, kwargs) -> None or (new_args, new_kwargs), before step()."""
        return _add_hook(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook):
        """hook(optimizer, args, kwargs), after step()."""
        return _add_hook(self._optimizer_step_post_hooks, hook)

    def register_state_dict_pre_hook(self, hook, prepend=False):
        handle = _add_hook(self._optimizer_state_dict_pre_hooks, hook)
        if prepend:
            self._optimizer_state_dict_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_state_dict_post_hook(self, hook, prepend=False):
        handle = _add_hook(self._optimizer_state_dict_post_hooks, hook)
        if prepend:
            self._optimizer_state_dict_post_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        handle = _add_hook(self._optimizer_load_state_dict_pre_hooks, hook)
        if prepend:
            self._optimizer_load_state_dict_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        handle = _add_hook(self._optimizer_load_state_dict_post_hooks, hook)
        if prepend:
            self._optimizer_load_state_dict_post_hooks.move_to_end(handle.id, last=False)
        return handle

    # -- state dicts ----------------------------------------------------
    def state_dict(self):
        """{'state': {index: {...}}, 'param_groups': [{..., 'params': [indices]}]};
        parameters are numbered in group order. The state's tensors are the
        optimizer's own (not copies), as in torch."""
        for hook in self._optimizer_state_dict_pre_hooks.values():
            hook(self)
        index_of = {}
        start = 0

        def pack_group(group):
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                index_of.setdefault(id(p), i)
            packed["params"] = [index_of[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed

        param_groups = [pack_group(g) for g in self.param_groups]
        packed_state = {(index_of[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        state_dict = {"state": packed_state, "param_groups": param_groups}
        for hook in self._optimizer_state_dict_post_hooks.values():
            result = hook(self, state_dict)
            if result is not None:
                state_dict = result
        return state_dict

    @staticmethod
    def _cast_state_value(param, value, key=None):
        """A loaded state tensor moved to its parameter's device (and, for a
        floating parameter, its dtype); 'step' stays as saved."""
        if key == "step":
            return value
        if param.is_floating_point():
            return value.to(dtype=param.dtype, device=param.device)
        return value.to(device=param.device)

    def load_state_dict(self, state_dict):
        """Load a state dict made by state_dict() (ember's or torch's, its
        tensors converted to ember tensors). Checks the groups match first, so
        a mismatched dict leaves the optimizer unchanged."""
        state_dict = dict(state_dict)
        for hook in self._optimizer_load_state_dict_pre_hooks.values():
            result = hook(self, state_dict)
            if result is not None:
                state_dict = result
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        param_of = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                            chain.from_iterable(g["params"] for g in groups)))

        def cast(param, value, key=None):
            if isinstance(value, Tensor):
                return self._cast_state_value(param, value, key)
            if isinstance(value, dict):
                return {k: cast(param, v, key=k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(cast(param, v) for v in value)
            return value

        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in param_of:
                state[param_of[k]] = cast(param_of[k], v)
            else:
                state[k] = v
        new_groups = []
        for group, saved in zip(groups, saved_groups):
            saved["params"] = group["params"]
            new_groups.append(saved)
        self.__setstate__({"state": state, "param_groups": new_groups})
        for hook in self._optimizer_load_state_dict_post_hooks.values():
            hook(self)
