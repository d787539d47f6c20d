"""torch.distributions.wishart: ember has no Wishart distribution yet (its sampler needs
chi-squared draws, and ember has no Gamma sampling); the class imports, and making one raises
NotImplementedError (peft imports it at load time, for its MonteCLoRA tuner only)."""
from ..distributed._absent import absent_class

Wishart = absent_class("Wishart", "Wishart distribution yet (no Gamma/chi-squared sampling)")
Wishart.__module__ = __name__

__all__ = ["Wishart"]
