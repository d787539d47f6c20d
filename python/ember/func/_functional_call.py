"""functional_call: run a module with some of its parameters and buffers
replaced by given tensors (torch.func.functional_call), and stack_module_state.
A parametrized tensor (nn.utils.parametrize) can be given by its own name.

The module's own tensors are swapped out for the call and put back after it,
even when the call raises. Names are the dotted ones of named_parameters /
named_buffers; with tie_weights a tensor registered under several names (tied
weights) is replaced under all of them when one name is given.
"""
from .. import _C


def _swap(module, name, value):
    """Put value at dotted name `name` of module; returns a function that undoes it."""
    *path, last = name.split(".")
    mod = module
    for p in path:
        mod = getattr(mod, p)
    for store in ("_parameters", "_buffers"):
        d = mod.__dict__.get(store)
        if d is not None and last in d:
            old = d[last]
            d[last] = value

            def undo(d=d, old=old):
                d[last] = old
            return undo
    prop = type(mod).__dict__.get(last)
    parametrized = mod.__dict__.get("_modules", {}).get("parametrizations")
    if isinstance(prop, property) and parametrized is not None and last in parametrized:
        # a parametrized tensor (the property of nn.utils.parametrize's class): read value
        # instead of the parametrization's output; assigning would run right_inverse
        setattr(type(mod), last, property(lambda self: value, prop.fset))

        def undo_property():
            setattr(type(mod), last, prop)
        return undo_property
    had = last in mod.__dict__
    old = mod.__dict__.get(last)
    object.__setattr__(mod, last, value)

    def undo_attr():
        if had:
            object.__setattr__(mod, last, old)
        else:
            object.__delattr__(mod, last)
    return undo_attr


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True,
                    strict=False):
    """module(*args, **kwargs) with the tensors named in parameter_and_buffer_dicts
    (a dict, or a tuple of dicts with distinct keys) in place of its own."""
    if isinstance(parameter_and_buffer_dicts, dict):
        given = dict(parameter_and_buffer_dicts)
    elif isinstance(parameter_and_buffer_dicts, (list, tuple)):
        given = {}
        seen = set()
        for d in parameter_and_buffer_dicts:
            dup = sorted(seen & set(d))
            if dup:
                raise ValueError(f"{dup} appeared in multiple dictionaries; behavior of functional call is "
                                 "ambiguous")
            seen |= set(d)
            given.update(d)
    else:
        raise ValueError(f"Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
                         f"{type(parameter_and_buffer_dicts)}")
    own = list(module.named_parameters(remove_duplicate=False)) + list(module.named_buffers(remove_duplicate=False))
    if tie_weights:
        names_of = {}
        for n, t in own:
            names_of.setdefault(id(t), []).append(n)
        for names in names_of.values():
            if len(names) < 2:
                continue
            present = [n for n in names if n in given]
            if not present:
                continue
            values = {id(given[n]) for n in present}
            if len(values) > 1:
                raise ValueError(f"functional_call got multiple values for keys {sorted(present)}, which are tied. "
                                 "Consider using tie_weights=False")
            for n in names:
                given.setdefault(n, given[present[0]])
    if strict:
        own_names = [n for n, _ in own]
        missing = [n for n in own_names if n not in given]
        unexpected = [n for n in given if n not in set(own_names)]
        msgs = []
        if unexpected:
            msgs.append("Unexpected key(s): {}.".format(", ".join(repr(k) for k in unexpected)))
        if missing:
            msgs.append("Missing key(s): {}.".format(", ".join(repr(k) for k in missing)))
        if msgs:
            raise RuntimeError("Error(s) in reparametrizing for {}:\n\t{}".format(module._get_name(),
                                                                                 "\n\t".join(msgs)))
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    undo = []
    try:
        for name, value in given.items():
            undo.append(_swap(module, name, value))
        return module(*args, **(kwargs or {}))
    finally:
        for u in reversed(undo):
            u()


def _stacked(tensors, name):
    first = tensors[0]
    for t in tensors[1:]:
        if t.shape != first.shape or t.dtype != first.dtype:
            raise RuntimeError(f"stack_module_state: expected all models to have the same shape and dtype for "
                               f"'{name}', got {tuple(first.shape)} {first.dtype} and {tuple(t.shape)} {t.dtype}")
    return _C.stack([t.detach() for t in tensors])


def stack_module_state(models):
    """(params, buffers): each of the models' parameters and buffers stacked along a
    new first dim, by name -- the state vmap(functional_call) takes for an ensemble."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    kind = type(models[0])
    if not all(type(m) is kind for m in models):
        raise RuntimeError(f"stack_module_state: Expected all models to be of the same class, got: "
                           f"{[type(m) for m in models]}")
    params = {}
    for name, p in models[0].named_parameters():
        group = [dict(m.named_parameters())[name] for m in models]
        params[name] = _stacked(group, name).requires_grad_(all(t.requires_grad for t in group))
    buffers = {name: _stacked([dict(m.named_buffers())[name] for m in models], name)
               for name, _ in models[0].named_buffers()}
    return params, buffers
