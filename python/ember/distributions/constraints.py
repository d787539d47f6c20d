"""Constraints on distribution parameters and supports (torch.distributions.constraints).

Each has check(value) -> bool tensor and torch's repr, which appears in the
ValueError raised for invalid parameters or values.
"""
from .. import _C

__all__ = ["Constraint", "boolean", "dependent", "dependent_property", "greater_than",
           "independent", "integer_interval", "interval", "less_than", "positive", "real",
           "real_vector", "simplex", "unit_interval", "is_dependent"]


class Constraint:
    is_discrete = False
    event_dim = 0

    def check(self, value):
        raise NotImplementedError

    def __repr__(self):
        return self.__class__.__name__[1:] + "()"


class _Dependent(Constraint):
    """A constraint that depends on other parameters; never checked."""

    def __init__(self, *, is_discrete=False, event_dim=0):
        self.is_discrete, self.event_dim = is_discrete, event_dim

    def check(self, x):
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint):
    return isinstance(constraint, _Dependent)


class _DependentProperty(property, _Dependent):
    """A property (such as a support computed from parameters) that is a dependent constraint."""

    def __init__(self, fn=None, *, is_discrete=False, event_dim=0):
        property.__init__(self, fn)
        _Dependent.__init__(self, is_discrete=is_discrete, event_dim=event_dim)

    def __call__(self, fn):
        return _DependentProperty(fn, is_discrete=self.is_discrete, event_dim=self.event_dim)


class _Real(Constraint):
    def check(self, value):
        return value == value  # False for NaN


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _Bounded(Constraint):
    def __init__(self, lower_bound=None, upper_bound=None):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def __repr__(self):
        bounds = []
        if self.lower_bound is not None:
            bounds.append(f"lower_bound={self.lower_bound}")
        if self.upper_bound is not None:
            bounds.append(f"upper_bound={self.upper_bound}")
        return f"{self.__class__.__name__[1:]}({', '.join(bounds)})"


class _GreaterThan(_Bounded):
    def __init__(self, lower_bound):
        super().__init__(lower_bound=lower_bound)

    def check(self, value):
        return self.lower_bound < value


class _LessThan(_Bounded):
    def __init__(self, upper_bound):
        super().__init__(upper_bound=upper_bound)

    def check(self, value):
        return value < self.upper_bound


class _Interval(_Bounded):
    def check(self, value):
        return (self.lower_bound <= value) & (value <= self.upper_bound)


class _IntegerInterval(_Bounded):
    is_discrete = True

    def check(self, value):
        return (value % 1 == 0) & (self.lower_bound <= value) & (value <= self.upper_bound)


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)


class _IndependentConstraint(Constraint):
    """base_constraint over the rightmost `reinterpreted_batch_ndims` dims as one event."""

    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        self.is_discrete = base_constraint.is_discrete
        self.event_dim = base_constraint.event_dim + reinterpreted_batch_ndims

    def check(self, value):
        result = self.base_constraint.check(value)
        n = self.reinterpreted_batch_ndims
        if result.dim() < n:
            raise ValueError(f"Expected value.dim() >= {self.event_dim} but got {value.dim()}")
        if n == 0:
            return result
        return result.reshape(tuple(result.shape[:result.dim() - n]) + (-1,)).all(-1)

    def __repr__(self):
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


dependent = _Dependent()
dependent_property = _DependentProperty
independent = _IndependentConstraint
boolean = _Boolean()
real = _Real()
real_vector = independent(real, 1)
positive = _GreaterThan(0.0)
greater_than = _GreaterThan
less_than = _LessThan
interval = _Interval
integer_interval = _IntegerInterval
unit_interval = _Interval(0.0, 1.0)
simplex = _Simplex()

del _C
