"""ember.layout: how a tensor's elements are arranged. ember's tensors are all
strided (dense, with a stride per dim), so `Tensor.layout` is always
ember.strided; torch's sparse layouts have no ember counterpart."""


class layout:
    __slots__ = ("_name",)

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return f"ember.{self._name}"

    def __reduce__(self):
        return self._name  # pickled as the global ember.<name>


strided = layout("strided")
