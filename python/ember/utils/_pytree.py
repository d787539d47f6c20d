"""torch.utils._pytree: flattening nested containers ("pytrees") into leaves and
a TreeSpec that rebuilds them, with a registry that user types join
(`register_pytree_node`, as transformers does for its ModelOutput classes).

Containers known from the start: tuple, list, dict, OrderedDict, defaultdict,
deque and namedtuples; anything else (None included) is a leaf."""
import collections
import dataclasses
from typing import Any, Callable, NamedTuple

__all__ = ["PyTree", "Context", "TreeSpec", "LeafSpec", "register_pytree_node", "tree_flatten",
           "tree_unflatten", "tree_leaves", "tree_structure", "tree_map", "tree_map_", "tree_map_only",
           "tree_iter", "tree_all", "tree_any", "tree_all_only", "tree_any_only", "tree_flatten_with_path",
           "tree_leaves_with_path", "tree_map_with_path", "keystr", "SequenceKey", "MappingKey", "GetAttrKey",
           "SUPPORTED_NODES", "is_namedtuple", "treespec_pprint"]

PyTree = Any
Context = Any
FlattenFunc = Callable[[PyTree], "tuple[list, Context]"]
UnflattenFunc = Callable[[list, Context], PyTree]


class NodeDef(NamedTuple):
    type: type
    flatten_fn: Callable
    unflatten_fn: Callable
    flatten_with_keys_fn: Any = None


SUPPORTED_NODES: "dict[type, NodeDef]" = {}
SUPPORTED_SERIALIZED_TYPES: "dict[type, str]" = {}


def register_pytree_node(cls, flatten_fn, unflatten_fn, *, serialized_type_name=None, to_dumpable_context=None,
                         from_dumpable_context=None, flatten_with_keys_fn=None):
    """cls becomes a container: flatten_fn(x) -> (children, context),
    unflatten_fn(children, context) -> x. Registering a type twice is an error."""
    if cls in SUPPORTED_NODES:
        raise ValueError(f"{cls} is already registered as pytree node.")
    SUPPORTED_NODES[cls] = NodeDef(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn)
    if serialized_type_name is not None:
        SUPPORTED_SERIALIZED_TYPES[cls] = serialized_type_name


def _register_pytree_node(cls, flatten_fn, unflatten_fn, *args, flatten_with_keys_fn=None, **kwargs):
    """The older spelling; to_str_fn/maybe_from_str_fn positional arguments are ignored."""
    register_pytree_node(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn=flatten_with_keys_fn,
                         serialized_type_name=kwargs.get("serialized_type_name"))


def _deregister_pytree_node(cls):
    SUPPORTED_NODES.pop(cls, None)
    SUPPORTED_SERIALIZED_TYPES.pop(cls, None)


# -- keys (paths to leaves) ---------------------------------------------------
@dataclasses.dataclass(frozen=True)
class SequenceKey:
    idx: int

    def __str__(self):
        return f"[{self.idx!r}]"

    def get(self, seq):
        return seq[self.idx]


@dataclasses.dataclass(frozen=True)
class MappingKey:
    key: Any

    def __str__(self):
        return f"[{self.key!r}]"

    def get(self, mapping):
        return mapping[self.key]


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    name: str

    def __str__(self):
        return f".{self.name}"

    def get(self, obj):
        return getattr(obj, self.name)


def keystr(kp):
    return "".join(str(k) for k in kp)


# -- the built-in containers ----------------------------------------------------
def is_namedtuple(obj):
    cls = obj if isinstance(obj, type) else type(obj)
    return issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple)


def _tuple_flatten(x):
    return list(x), None


def _tuple_unflatten(values, context):
    return tuple(values)


def _seq_flatten_with_keys(x):
    children, ctx = SUPPORTED_NODES[type(x)].flatten_fn(x)
    return [(SequenceKey(i), v) for i, v in enumerate(children)], ctx


def _list_flatten(x):
    return list(x), None


def _list_unflatten(values, context):
    return list(values)


def _dict_flatten(d):
    return list(d.values()), list(d.keys())


def _dict_unflatten(values, context):
    return dict(zip(context, values))


def _dict_flatten_with_keys(d):
    values, context = _dict_flatten(d)
    return [(MappingKey(k), v) for k, v in zip(context, values)], context


def _ordereddict_unflatten(values, context):
    return collections.OrderedDict(zip(context, values))


def _defaultdict_flatten(d):
    values, keys = _dict_flatten(d)
    return values, [d.default_factory, keys]


def _defaultdict_unflatten(values, context):
    factory, keys = context
    return collections.defaultdict(factory, zip(keys, values))


def _defaultdict_flatten_with_keys(d):
    values, context = _defaultdict_flatten(d)
    return [(MappingKey(k), v) for k, v in zip(context[1], values)], context


def _deque_flatten(d):
    return list(d), d.maxlen


def _deque_unflatten(values, context):
    return collections.deque(values, maxlen=context)


def _namedtuple_flatten(x):
    return list(x), type(x)


def _namedtuple_unflatten(values, context):
    return context(*values)


def _namedtuple_flatten_with_keys(x):
    return [(GetAttrKey(f), v) for f, v in zip(type(x)._fields, x)], type(x)


register_pytree_node(tuple, _tuple_flatten, _tuple_unflatten, flatten_with_keys_fn=_seq_flatten_with_keys)
register_pytree_node(list, _list_flatten, _list_unflatten, flatten_with_keys_fn=_seq_flatten_with_keys)
register_pytree_node(dict, _dict_flatten, _dict_unflatten, flatten_with_keys_fn=_dict_flatten_with_keys)
register_pytree_node(collections.OrderedDict, _dict_flatten, _ordereddict_unflatten,
                     flatten_with_keys_fn=_dict_flatten_with_keys)
register_pytree_node(collections.defaultdict, _defaultdict_flatten, _defaultdict_unflatten,
                     flatten_with_keys_fn=_defaultdict_flatten_with_keys)
register_pytree_node(collections.deque, _deque_flatten, _deque_unflatten, flatten_with_keys_fn=_seq_flatten_with_keys)
_NAMEDTUPLE_NODE = NodeDef(tuple, _namedtuple_flatten, _namedtuple_unflatten, _namedtuple_flatten_with_keys)
# torch keys every namedtuple class under collections.namedtuple itself; code
# walking SUPPORTED_NODES by _get_node_type (Lightning's CombinedLoader) needs it
SUPPORTED_NODES[collections.namedtuple] = NodeDef(collections.namedtuple, _namedtuple_flatten,
                                                  _namedtuple_unflatten, _namedtuple_flatten_with_keys)


def _get_node_type(tree):
    """The SUPPORTED_NODES key for tree: collections.namedtuple for any
    namedtuple, else its type."""
    return collections.namedtuple if is_namedtuple(tree) and not isinstance(tree, type) else type(tree)


def _node_of(x):
    """The NodeDef that flattens x, or None for a leaf."""
    node = SUPPORTED_NODES.get(type(x))
    if node is None and is_namedtuple(x):
        return _NAMEDTUPLE_NODE
    return node


# -- specs ---------------------------------------------------------------------------
class TreeSpec:
    """The structure of a flattened tree: the node type, its context and the
    children's specs. A LeafSpec marks where a leaf goes."""

    def __init__(self, type, context, children_specs):  # noqa: A002
        self.type = type
        self.context = context
        self.children_specs = list(children_specs)
        self.num_nodes = 1 + sum(c.num_nodes for c in self.children_specs)
        self.num_leaves = sum(c.num_leaves for c in self.children_specs)
        self.num_children = len(self.children_specs)

    def is_leaf(self):
        return False

    def unflatten(self, leaves):
        return tree_unflatten(leaves, self)

    def flatten_up_to(self, tree):
        """The subtrees of tree at this spec's leaves (tree must have this structure up to them)."""
        out = []
        self._flatten_up_to(tree, out)
        return out

    def _flatten_up_to(self, tree, out):
        if self.is_leaf():
            out.append(tree)
            return
        node = _node_of(tree)
        if node is None or (type(tree) is not self.type and not (self.type is tuple and is_namedtuple(tree))):
            raise ValueError(f"Node type mismatch; expected {self.type}, but got {type(tree)}.")
        children, context = node.flatten_fn(tree)
        if len(children) != self.num_children:
            raise ValueError(f"Node arity mismatch; expected {self.num_children}, but got {len(children)}.")
        if context != self.context:
            raise ValueError(f"Node context mismatch for custom node type {self.type}.")
        for child, spec in zip(children, self.children_specs):
            spec._flatten_up_to(child, out)

    def __eq__(self, other):
        if not isinstance(other, TreeSpec):
            return NotImplemented
        return (self.type is other.type and self.is_leaf() == other.is_leaf() and self.context == other.context
                and self.children_specs == other.children_specs)

    def __hash__(self):
        return hash((self.type, self.num_leaves, self.num_nodes))

    def __repr__(self, indent=0):
        if self.is_leaf():
            return "*"
        name = getattr(self.type, "__name__", str(self.type))
        children = ", ".join(c.__repr__() for c in self.children_specs)
        return f"TreeSpec({name}, {self.context!r}, [{children}])"


class LeafSpec(TreeSpec):
    def __init__(self):
        self.type = None
        self.context = None
        self.children_specs = []
        self.num_nodes = 1
        self.num_leaves = 1
        self.num_children = 0

    def is_leaf(self):
        return True

    def __repr__(self, indent=0):
        return "*"


_LEAF_SPEC = LeafSpec()


def treespec_pprint(treespec):
    return repr(treespec)


# -- flatten / unflatten ---------------------------------------------------------------
def _is_leaf(tree, is_leaf):
    return (is_leaf is not None and is_leaf(tree)) or _node_of(tree) is None


def tree_flatten(tree, is_leaf=None):
    """(leaves, spec): the leaves in order, and the structure to rebuild them."""
    leaves = []
    spec = _flatten(tree, is_leaf, leaves)
    return leaves, spec


def _flatten(tree, is_leaf, leaves):
    if _is_leaf(tree, is_leaf):
        leaves.append(tree)
        return _LEAF_SPEC
    node = _node_of(tree)
    children, context = node.flatten_fn(tree)
    specs = [_flatten(c, is_leaf, leaves) for c in children]
    node_type = type(tree) if node is not _NAMEDTUPLE_NODE else type(tree)
    return TreeSpec(node_type, context, specs)


def tree_unflatten(leaves, treespec):
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"tree_unflatten(leaves, treespec): Expected `treespec` to be instance of TreeSpec but got "
                        f"item of type {type(treespec)}.")
    leaves = list(leaves)
    if len(leaves) != treespec.num_leaves:
        raise ValueError(f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec refers to a "
                         f"pytree that holds {treespec.num_leaves} items ({treespec}).")
    it = iter(leaves)
    return _unflatten(it, treespec)


def _unflatten(it, spec):
    if spec.is_leaf():
        return next(it)
    children = [_unflatten(it, c) for c in spec.children_specs]
    node = SUPPORTED_NODES.get(spec.type)
    if node is None and is_namedtuple(spec.type):
        node = _NAMEDTUPLE_NODE
    if node is None:
        raise ValueError(f"{spec.type} is not a registered pytree node")
    return node.unflatten_fn(children, spec.context)


def tree_iter(tree, is_leaf=None):
    if _is_leaf(tree, is_leaf):
        yield tree
        return
    children, _ = _node_of(tree).flatten_fn(tree)
    for c in children:
        yield from tree_iter(c, is_leaf)


def tree_leaves(tree, is_leaf=None):
    return list(tree_iter(tree, is_leaf))


def tree_structure(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[1]


def tree_map(func, tree, *rests, is_leaf=None):
    """func applied to every leaf (and the matching leaves of rests, which must have tree's structure up to them)."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [spec.flatten_up_to(r) for r in rests]
    return spec.unflatten([func(*xs) for xs in zip(leaves, *others)])


def tree_map_(func, tree, *rests, is_leaf=None):
    """func on every leaf for its side effects; returns tree."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [spec.flatten_up_to(r) for r in rests]
    for xs in zip(leaves, *others):
        func(*xs)
    return tree


def _type_filter(type_or_types, func):
    def wrapped(x):
        return func(x) if isinstance(x, type_or_types) else x
    return wrapped


def tree_map_only(type_or_types, func, tree, is_leaf=None):
    """func on the leaves that are instances of type_or_types; others unchanged."""
    return tree_map(_type_filter(type_or_types, func), tree, is_leaf=is_leaf)


def tree_map_only_(type_or_types, func, tree, is_leaf=None):
    return tree_map_(_type_filter(type_or_types, func), tree, is_leaf=is_leaf)


def tree_all(pred, tree, is_leaf=None):
    return all(pred(x) for x in tree_iter(tree, is_leaf))


def tree_any(pred, tree, is_leaf=None):
    return any(pred(x) for x in tree_iter(tree, is_leaf))


def tree_all_only(type_or_types, pred, tree, is_leaf=None):
    return all(pred(x) for x in tree_iter(tree, is_leaf) if isinstance(x, type_or_types))


def tree_any_only(type_or_types, pred, tree, is_leaf=None):
    return any(pred(x) for x in tree_iter(tree, is_leaf) if isinstance(x, type_or_types))


# -- paths ------------------------------------------------------------------------------
def tree_flatten_with_path(tree, is_leaf=None):
    """([(key path, leaf), ...], spec)."""
    out = []
    _with_path(tree, is_leaf, (), out)
    return out, tree_structure(tree, is_leaf)


def _with_path(tree, is_leaf, path, out):
    if _is_leaf(tree, is_leaf):
        out.append((path, tree))
        return
    node = _node_of(tree)
    if node.flatten_with_keys_fn is None:
        raise ValueError(f"Did not find a flatten_with_keys_fn for type: {type(tree)}. Please pass a "
                         "flatten_with_keys_fn argument to register_pytree_node.")
    pairs, _ = node.flatten_with_keys_fn(tree)
    for k, child in pairs:
        _with_path(child, is_leaf, path + (k,), out)


def tree_leaves_with_path(tree, is_leaf=None):
    return tree_flatten_with_path(tree, is_leaf)[0]


def tree_map_with_path(func, tree, *rests, is_leaf=None):
    pairs, spec = tree_flatten_with_path(tree, is_leaf)
    others = [spec.flatten_up_to(r) for r in rests]
    return spec.unflatten([func(p, x, *xs) for (p, x), *xs in zip(pairs, *others)])
