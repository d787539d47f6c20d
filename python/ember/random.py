"""ember.random: seeding and state of the default random generator (torch.random)."""
from . import _C


def manual_seed(seed):
    """Seed the default generator and every GPU's (as torch); returns the default one."""
    g = _C.default_generator.manual_seed(seed)
    _C._cuda_seed_all_lazily(int(seed))  # the GPUs' too, without loading CUDA (as torch defers it)
    return g


def seed():
    """Seed the default generator non-deterministically; returns the seed."""
    return _C.default_generator.seed()


def initial_seed():
    """The seed the default generator was last seeded with."""
    return _C.default_generator.initial_seed()


def get_rng_state():
    """The default generator's state, as a uint8 tensor."""
    return _C.default_generator.get_state()


def set_rng_state(new_state):
    """Restore the default generator's state from get_rng_state()."""
    _C.default_generator.set_state(new_state)
