"""ember.utils: helpers shared by the Python layer."""
from . import hooks  # noqa: F401
