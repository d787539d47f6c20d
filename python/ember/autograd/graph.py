"""ember.autograd.graph: the node type of the autograd graph (grad_fn objects)."""
from .. import _C

Node = _C.Node
