"""The version ember answers as `torch.__version__`: the torch release whose API
ember follows, with a local label naming ember's own release (PEP 440:
"2.15.0+ember0.1.0"). Like torch's TorchVersion it is a str that compares with
strings, tuples and packaging Versions as a version, not as text, so scripts'
`torch.__version__ >= "2.1"` checks answer as they do on torch."""

TORCH_API_VERSION = "2.15.0"  # the torch release whose names and semantics ember follows
EMBER_VERSION = "0.1.0"       # ember's own release (pyproject.toml's version)


def _release(text):
    """(2, 15, 0) from "2.15.0+ember0.1.0"; used when packaging is not installed."""
    head = str(text).split("+")[0]
    parts = []
    for piece in head.split("."):
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        parts.append(int(digits))
        if len(digits) != len(piece):
            break
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


class TorchVersion(str):
    """A version string that compares as a version."""

    def _key(self, other):
        try:
            from packaging.version import Version, InvalidVersion
        except ImportError:
            if isinstance(other, tuple):
                other = ".".join(str(p) for p in other)
            if not isinstance(other, str):
                raise TypeError(f"can't compare a TorchVersion with {type(other).__name__}")
            return _release(self), _release(other)
        if isinstance(other, tuple):
            other = ".".join(str(p) for p in other)
        if isinstance(other, str):
            try:
                other = Version(other)
            except InvalidVersion:
                raise ValueError(f"{other!r} is not a valid version to compare with {str(self)!r}") from None
        if not isinstance(other, Version):
            raise TypeError(f"can't compare a TorchVersion with {type(other).__name__}")
        return Version(str(self)), other

    def __lt__(self, other):
        a, b = self._key(other)
        return a < b

    def __le__(self, other):
        a, b = self._key(other)
        return a <= b

    def __gt__(self, other):
        a, b = self._key(other)
        return a > b

    def __ge__(self, other):
        a, b = self._key(other)
        return a >= b

    def __eq__(self, other):
        if isinstance(other, str) and str.__eq__(self, other):
            return True
        try:
            a, b = self._key(other)
        except (TypeError, ValueError):
            return False
        return a == b

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = str.__hash__


__version__ = TorchVersion(f"{TORCH_API_VERSION}+ember{EMBER_VERSION}")
