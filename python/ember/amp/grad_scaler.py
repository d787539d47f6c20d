"""GradScaler (torch.amp.GradScaler's API): multiplies the loss by a scale
so that small float16 gradients don't flush to zero, divides the gradients
back before the optimizer step, skips steps whose gradients hold inf/NaN and
adapts the scale. For device='cuda' without a CUDA backend it disables
itself with a warning, as torch does; then scale() returns its input,
step() just steps and get_scale() is 1.0."""
import math
import warnings

from ..autograd.grad_mode import no_grad

_READY, _UNSCALED, _STEPPED = 0, 1, 2


class GradScaler:
    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if enabled and device == "cuda":
            from .. import cuda
            if not cuda.is_available():
                warnings.warn("ember.amp.GradScaler is enabled, but CUDA is not available. Disabling.",
                              stacklevel=2)
                enabled = False
        if enabled:
            if growth_factor <= 1.0:
                raise ValueError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise ValueError("The backoff factor must be < 1.0.")
        self._device = device
        self._enabled = enabled
        self._scale = float(init_scale)
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = growth_interval
        self._growth_tracker = 0
        self._per_optimizer = {}  # id(optimizer) -> {"stage", "found_inf"}

    def is_enabled(self):
        return self._enabled

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"stage": _READY, "found_inf": False})

    def scale(self, outputs):
        """outputs * scale (tensors, or lists/tuples of them)."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        return outputs * self._scale

    def unscale_(self, optimizer):
        """Divide the optimizer's gradients by the scale, noting inf/NaN."""
        if not self._enabled:
            return
        st = self._state(optimizer)
        if st["stage"] == _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if st["stage"] == _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv = 1.0 / self._scale
        found = False
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.grad.mul_(inv)
                    found = found or not bool(p.grad.isfinite().all())
        st.update(stage=_UNSCALED, found_inf=found)

    def step(self, optimizer, *args, **kwargs):
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        st = self._state(optimizer)
        if st["stage"] == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if st["stage"] == _READY:
            self.unscale_(optimizer)
        result = None if st["found_inf"] else optimizer.step(*args, **kwargs)
        st["stage"] = _STEPPED
        return result

    def update(self, new_scale=None):
        """Back off after a step with inf/NaN gradients; grow after growth_interval clean ones."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale)
        elif self._per_optimizer:
            if any(st["found_inf"] for st in self._per_optimizer.values()):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    if math.isfinite(self._scale * self._growth_factor):
                        self._scale *= self._growth_factor
                    self._growth_tracker = 0
        self._per_optimizer = {}

    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = new_interval

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a "
                               "disabled instance of GradScaler.")
        self._scale = float(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._growth_tracker = int(state_dict["_growth_tracker"])
