"""ember.cuda: this build has no CUDA backend, so no GPU is ever available."""


def is_available():
    return False


def device_count():
    return 0


def is_bf16_supported():
    return False
