"""Flattening nested Python containers of tensors ("pytrees") for ember.func:
tuples, lists, dicts (in key order) and namedtuples are containers; anything
else is a leaf. A spec records the structure so results can be rebuilt."""
import collections

LEAF = None  # the spec of a leaf


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def tree_flatten(tree):
    """(leaves, spec): the leaves in order, and the container structure."""
    if _is_namedtuple(tree):
        parts = [tree_flatten(v) for v in tree]
        return [l for ls, _ in parts for l in ls], (type(tree), None, [s for _, s in parts])
    if isinstance(tree, (tuple, list)):
        parts = [tree_flatten(v) for v in tree]
        return [l for ls, _ in parts for l in ls], (type(tree), None, [s for _, s in parts])
    if isinstance(tree, dict):
        keys = list(tree.keys())
        parts = [tree_flatten(tree[k]) for k in keys]
        return [l for ls, _ in parts for l in ls], (type(tree), keys, [s for _, s in parts])
    return [tree], LEAF


def tree_unflatten(leaves, spec):
    it = iter(leaves)
    result = _build(it, spec)
    return result


def _build(it, spec):
    if spec is LEAF:
        return next(it)
    kind, keys, children = spec
    values = [_build(it, c) for c in children]
    if keys is not None:
        d = kind() if kind in (dict, collections.OrderedDict) else dict()
        for k, v in zip(keys, values):
            d[k] = v
        return d
    if kind in (tuple, list):
        return kind(values)
    return kind(*values)  # namedtuple


def tree_map(fn, tree):
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([fn(x) for x in leaves], spec)


def spec_repr(spec):
    """A short picture of a structure: '*' for a leaf, '(*, *)' for a 2-tuple."""
    if spec is LEAF:
        return "*"
    kind, keys, children = spec
    inner = [spec_repr(c) for c in children]
    if keys is not None:
        return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(keys, inner)) + "}"
    if kind is list:
        return "[" + ", ".join(inner) + "]"
    return "(" + ", ".join(inner) + ("," if len(inner) == 1 else "") + ")"


def broadcast_prefix(prefix, tree, is_leaf_value):
    """One value per leaf of `tree`: `prefix` is a value (a leaf of the prefix tree,
    as told by is_leaf_value) standing for a whole subtree, or a container of the
    same kind and size as tree's. None when the structures do not match."""
    if is_leaf_value(prefix):
        return [prefix] * len(tree_flatten(tree)[0])
    if isinstance(prefix, (tuple, list)) and isinstance(tree, (tuple, list)):
        if len(prefix) != len(tree):
            return None
        out = []
        for p, t in zip(prefix, tree):
            sub = broadcast_prefix(p, t, is_leaf_value)
            if sub is None:
                return None
            out += sub
        return out
    if isinstance(prefix, dict) and isinstance(tree, dict):
        if set(prefix) != set(tree):
            return None
        out = []
        for k in tree:
            sub = broadcast_prefix(prefix[k], tree[k], is_leaf_value)
            if sub is None:
                return None
            out += sub
        return out
    return None
