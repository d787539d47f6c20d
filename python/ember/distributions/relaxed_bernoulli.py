"""RelaxedBernoulli(temperature, probs | logits) and LogitRelaxedBernoulli: the binary Concrete
distribution (Maddison, Mnih and Teh 2017), reparameterised through logistic noise."""
import math
import numbers

from .. import _C
from ..nn import functional as F
from . import constraints
from .distribution import Distribution, _NoGrad
from .utils import broadcast_all, clamp_probs, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli"]


class LogitRelaxedBernoulli(Distribution):
    """The logit of a RelaxedBernoulli sample: (logits + Logistic(0, 1) noise) / temperature."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        self.temperature = temperature
        given = probs if probs is not None else logits
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
        else:
            (self.logits,) = broadcast_all(logits)
        param = self.probs if probs is not None else self.logits
        batch_shape = _C.Size() if isinstance(given, numbers.Number) else param.size()
        super().__init__(batch_shape, validate_args=validate_args)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def _param(self):
        return self.__dict__["probs"] if "probs" in self.__dict__ else self.__dict__["logits"]

    @property
    def param_shape(self):
        return self._param.size()

    def rsample(self, sample_shape=_C.Size()):
        shape = self._extended_shape(sample_shape)
        probs = clamp_probs(self.probs.expand(shape))
        u = clamp_probs(_C.rand(*shape, dtype=probs.dtype, device=probs.device))
        return (u.log() - (-u).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = _C.broadcast_tensors([self.logits, value])
        diff = logits - value * self.temperature
        t = self.temperature
        log_t = t.log() if isinstance(t, _C.Tensor) else math.log(t)
        return log_t + diff - 2 * F.softplus(diff)


class RelaxedBernoulli(Distribution):
    """Samples in (0, 1) that approach Bernoulli(probs) samples as temperature -> 0: the sigmoid
    of a LogitRelaxedBernoulli sample."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self.base_dist = LogitRelaxedBernoulli(temperature, probs, logits, validate_args=validate_args)
        super().__init__(self.base_dist.batch_shape, validate_args=validate_args)

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs

    def sample(self, sample_shape=_C.Size()):
        with _NoGrad():
            return self.rsample(sample_shape).detach()

    def rsample(self, sample_shape=_C.Size()):
        return clamp_probs(self.base_dist.rsample(sample_shape).sigmoid())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = clamp_probs(value)
        x = value.log() - (-value).log1p()
        # change of variables y = sigmoid(x): dy/dx = y (1 - y)
        return self.base_dist.log_prob(x) - value.log() - (-value).log1p()

