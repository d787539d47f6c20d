"""ember.nn.utils: gradient clipping, parameter/vector conversion, padding sequences,
parametrizations (weight_norm, spectral_norm), functional_call."""
from . import rnn  # noqa: F401
from .clip_grad import clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm  # noqa: F401
from .convert_parameters import parameters_to_vector, vector_to_parameters  # noqa: F401
from . import stateless  # noqa: F401,E402
from . import parametrize, parametrizations  # noqa: F401,E402
from .weight_norm import weight_norm, remove_weight_norm  # noqa: F401,E402
from .spectral_norm import spectral_norm, remove_spectral_norm  # noqa: F401,E402
from . import prune  # noqa: F401,E402
from .fusion import (fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval,  # noqa: F401,E402
                     fuse_linear_bn_weights)
