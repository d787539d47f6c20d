"""ember.utils: helpers shared by the Python layer."""
from . import hooks  # noqa: F401
from . import data  # noqa: F401  (ember.utils.data after `import ember`, as in torch)
