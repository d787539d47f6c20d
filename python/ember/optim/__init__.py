"""ember.optim: torch.optim's optimizers and learning-rate schedulers."""
from . import lr_scheduler  # noqa: F401
from . import swa_utils  # noqa: F401
from .adagrad import Adagrad
from .adam import Adam
from .adamw import AdamW
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Adagrad", "Adam", "AdamW", "Optimizer", "RMSprop", "SGD", "lr_scheduler", "swa_utils"]
