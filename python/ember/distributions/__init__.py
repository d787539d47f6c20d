"""ember.distributions: a faithful subset of torch.distributions.

Normal, Uniform (reparameterizable: rsample), Bernoulli and Categorical,
with torch's shapes, argument validation and kl_divergence; every density
and entropy is a composition of ember ops, so gradients flow through them.
"""
from . import constraints
from .bernoulli import Bernoulli
from .categorical import Categorical
from .distribution import Distribution
from .kl import kl_divergence, register_kl
from .normal import Normal
from .uniform import Uniform
from .relaxed_bernoulli import LogitRelaxedBernoulli, RelaxedBernoulli
from .wishart import Wishart

__all__ = ["Bernoulli", "Categorical", "Distribution", "LogitRelaxedBernoulli", "Normal", "RelaxedBernoulli",
           "Uniform", "Wishart", "constraints",
           "kl_divergence", "register_kl"]
