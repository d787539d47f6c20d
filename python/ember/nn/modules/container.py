"""Containers: Sequential, ModuleList, ModuleDict, ParameterList,
ParameterDict (torch.nn's). Items are registered under their index or key,
so state_dict names are '0.weight', 'blocks.3.attn.weight', ..."""
import operator
from collections import OrderedDict
from collections.abc import Mapping
from itertools import chain, islice

from ... import _C
from ..parameter import Parameter
from .module import Module, _addindent

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]


def _index(idx, n, kind):
    """A Python index into n items, as torch's containers check it."""
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range")
    return idx % n if n else idx


class Sequential(Module):
    """Modules called in order, each one's output the next one's input."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def _get_item_by_idx(self, iterator, idx):
        n = len(self)
        idx = _index(idx, n, "Sequential")
        return next(islice(iterator, idx, None))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return self._get_item_by_idx(iter(self._modules.values()), idx)

    def __setitem__(self, idx, module):
        key = self._get_item_by_idx(iter(self._modules.keys()), idx)
        setattr(self, key, module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for key in list(self._modules.keys())[idx]:
                delattr(self, key)
        else:
            delattr(self, self._get_item_by_idx(iter(self._modules.keys()), idx))
        # keys stay numbered 0..n-1 (torch renumbers too)
        self._modules = OrderedDict((str(i), m) for i, m in enumerate(self._modules.values()))

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class, "
                             f"but {type(other)} is given.")
        ret = Sequential()
        for m in chain(self, other):
            ret.append(m)
        return ret

    def __iadd__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class, "
                             f"but {type(other)} is given.")
        for m in list(other):
            self.append(m)
        return self

    def __mul__(self, other):
        if not isinstance(other, int):
            raise TypeError(f"unsupported operand type(s) for *: {type(self)} and {type(other)}")
        if other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for {type(self)}")
        ret = Sequential()
        for _ in range(other):
            for m in self:
                ret.append(m)
        return ret

    __rmul__ = __mul__

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index, module):
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules = OrderedDict((str(i), m) for i, m in enumerate(mods))
        return self

    def extend(self, sequential):
        for m in sequential:
            self.append(m)
        return self

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def forward(self, input):
        for module in self:
            input = module(input)
        return input


class ModuleList(Module):
    """A list of modules, registered under '0', '1', ..."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self += modules

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self), "ModuleList"))]

    def __setitem__(self, idx, module):
        setattr(self, str(_index(idx, len(self), "ModuleList")), module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for k in range(len(self._modules))[idx]:
                delattr(self, str(k))
        else:
            delattr(self, str(_index(idx, len(self), "ModuleList")))
        self._modules = OrderedDict((str(i), m) for i, m in enumerate(self._modules.values()))

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        combined = ModuleList()
        for i, m in enumerate(chain(self, other)):
            combined.add_module(str(i), m)
        return combined

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]

    def __repr__(self):
        """Runs of identical modules are shown once with their index range, as torch does."""
        items = list(self._modules.items())
        if not items:
            return self._get_name() + "()"
        lines, start = [], 0
        reprs = [repr(m) for _, m in items]
        for i in range(1, len(items) + 1):
            if i == len(items) or reprs[i] != reprs[start]:
                label = f"({start})" if i - start == 1 else f"({start}-{i - 1}): {i - start} x"
                lines.append((label + ": " if i - start == 1 else label + " ") + _addindent(reprs[start], 2))
                start = i
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

    def insert(self, index, module):
        for i in range(len(self._modules), index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def extend(self, modules):
        if isinstance(modules, (Module, _C.Tensor)) or not hasattr(modules, "__iter__"):
            raise TypeError("ModuleList.extend should be called with an iterable, but got "
                            + type(modules).__name__)
        offset = len(self)
        for i, m in enumerate(modules):
            self.add_module(str(offset + i), m)
        return self

    forward = None


class ModuleDict(Module):
    """An ordered dict of modules."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        if isinstance(modules, (OrderedDict, ModuleDict, Mapping)):
            for key, module in modules.items():
                self[key] = module
            return
        if not hasattr(modules, "__iter__") or isinstance(modules, (str, Module)):
            raise TypeError("ModuleDict.update should be called with an iterable of key/value pairs, "
                            "but got " + type(modules).__name__)
        for j, m in enumerate(modules):
            if not hasattr(m, "__iter__") or isinstance(m, str):
                raise TypeError(f"ModuleDict update sequence element #{j} should be Iterable; is "
                                + type(m).__name__)
            if len(m) != 2:
                raise ValueError(f"ModuleDict update sequence element #{j} has length {len(m)}; 2 is required")
            self[m[0]] = m[1]

    forward = None


def _as_parameter(value):
    """ParameterList/Dict keep tensors as Parameters (plain tensors are wrapped, as torch does)."""
    if isinstance(value, _C.Tensor) and not isinstance(value, Parameter):
        return Parameter(value, value.requires_grad or value.is_floating_point())
    return value


def _param_lines(items, type_name):
    """extra_repr of ParameterList/Dict: one '  (key): ...' line per item (torch's format;
    the list names the dtype, the dict the legacy type name)."""
    lines = []
    for k, p in items:
        if isinstance(p, _C.Tensor):
            kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
            size = "x".join(str(s) for s in p.size())
            dev = "" if p.device.type == "cpu" else f" ({p.device})"
            lines.append(f"  ({k}): {kind} containing: [{type_name(p)} of size {size}{dev}]")
        else:
            lines.append(f"  ({k}): Object of type: {type(p).__name__}")
    return "\n".join(lines)


class ParameterList(Module):
    """A list of parameters (and other objects), registered under '0', '1', ..."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            out = type(self)()
            for i in range(self._size)[idx]:
                out.append(self[i])
            return out
        return getattr(self, str(_index(idx, self._size, "ParameterList")))

    def __setitem__(self, idx, param):
        idx = _index(idx, self._size, "ParameterList")
        setattr(self, str(idx), _as_parameter(param))

    def __len__(self):
        return self._size

    def __iter__(self):
        return iter(self[i] for i in range(self._size))

    def __iadd__(self, parameters):
        return self.extend(parameters)

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]

    def append(self, value):
        new_idx = self._size
        self._size += 1
        self[new_idx] = value
        return self

    def extend(self, values):
        if not hasattr(values, "__iter__") or isinstance(values, (str, _C.Tensor)):
            raise TypeError("ParameterList.extend should be called with an iterable, but got "
                            + type(values).__name__)
        for v in values:
            self.append(v)
        return self

    def extra_repr(self):
        return _param_lines(enumerate(self), lambda p: str(p.dtype))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """An ordered dict of parameters (and other objects)."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    def _key(self, key):
        if not isinstance(key, str):
            raise TypeError(f"ParameterDict keys must be strings, got {type(key).__name__}")
        return key

    def __getitem__(self, key):
        return getattr(self, self._key(key))

    def __setitem__(self, key, value):
        self._keys[self._key(key)] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, key)

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(list(self._keys))

    def __contains__(self, key):
        return key in self._keys

    def copy(self):
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        for k in list(self._keys):
            del self[k]

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def popitem(self):
        k = list(self._keys)[-1]
        v = self[k]
        del self[k]
        return k, v

    def get(self, key, default=None):
        return self[key] if key in self else default

    def fromkeys(self, keys, default=None):
        return ParameterDict((k, default) for k in keys)

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def update(self, parameters):
        if isinstance(parameters, Mapping):
            items = parameters.items()
            if not isinstance(parameters, (OrderedDict, ParameterDict)):
                items = sorted(items)  # a plain dict is inserted in key order, as torch does
        elif hasattr(parameters, "__iter__") and not isinstance(parameters, str):
            items = []
            for j, p in enumerate(parameters):
                if not hasattr(p, "__iter__") or isinstance(p, str):
                    raise TypeError(f"ParameterDict update sequence element #{j} should be Iterable; is "
                                    + type(p).__name__)
                if len(p) != 2:
                    raise ValueError(f"ParameterDict update sequence element #{j} has length {len(p)}; "
                                     "2 is required")
                items.append(tuple(p))
        else:
            raise TypeError("ParametersDict.update should be called with an iterable of key/value pairs, "
                            "but got " + type(parameters).__name__)
        for k, v in items:
            self[k] = v

    def __or__(self, other):
        out = self.copy()
        out.update(other)
        return out

    def extra_repr(self):
        return _param_lines(self.items(), lambda p: p.type())

    def __call__(self, input):
        raise RuntimeError("ParameterDict should not be called.")
