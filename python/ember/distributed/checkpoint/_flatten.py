"""Nested state dicts as one level: {"model": {"fc.weight": t}} is key
"model.fc.weight" (lists and tuples by index), as torch's checkpoint flattens."""
from collections.abc import Mapping

__all__ = ["flatten_state_dict"]


_PLAIN = (int, float, str, bool, type(None))


def _plain_sequence(v):
    """A list or tuple of plain values is one value (a JSON list), not a container."""
    return all(isinstance(x, _PLAIN) for x in v)


def flatten_state_dict(state_dict):
    """[(flat key, container, key in container, value)] for every leaf."""
    out = []

    def walk(obj, prefix):
        items = obj.items() if isinstance(obj, Mapping) else enumerate(obj)
        for k, v in items:
            if isinstance(obj, Mapping) and not isinstance(k, str):
                raise ValueError(f"distributed checkpoint: state_dict keys must be str, got {k!r} under "
                                 f"{prefix[:-1] or 'the top level'}")
            key = prefix + str(k)
            if isinstance(v, Mapping) or (isinstance(v, (list, tuple)) and not _plain_sequence(v)):
                walk(v, key + ".")
            else:
                out.append((key, obj, k, v))
    walk(state_dict, "")
    return out
