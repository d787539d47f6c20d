"""Names of torch.distributed's sharded-tensor stack (DTensor, device meshes,
HuggingFace checkpoint storage) that ember does not have. Code that imports
them at load time (transformers does, whenever torch.distributed is
available) loads; nothing is an instance of these classes, and making one or
calling one of these functions raises NotImplementedError saying what ember
offers instead. No call pretends to work."""


def absent_class(name, what):
    """A class that code can import and test isinstance against; making one raises."""

    def __new__(cls, *args, **kwargs):
        raise NotImplementedError(f"{name}: ember has no {what}")

    return type(name, (), {"__new__": __new__, "__doc__": f"Not available in ember: {what}.",
                           "__module__": __name__})


def absent_function(name, what):
    def fn(*args, **kwargs):
        raise NotImplementedError(f"{name}(): ember has no {what}")

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Not available in ember: {what}."
    return fn
