"""torch.cuda's CUDA-graph API: ember does not capture CUDA graphs, so no stream
is ever capturing, nothing is a CUDAGraph, and making one (or entering
`graph`) raises RuntimeError saying so."""

_NO_GRAPHS = "ember does not support CUDA graphs (stream capture); run the code eagerly"


def is_current_stream_capturing():
    """False: ember never captures a stream."""
    return False


class CUDAGraph:
    def __init__(self, *args, **kwargs):
        raise RuntimeError(_NO_GRAPHS)


class graph:
    def __init__(self, cuda_graph=None, pool=None, stream=None, capture_error_mode="global"):
        raise RuntimeError(_NO_GRAPHS)


def graph_pool_handle():
    raise RuntimeError(_NO_GRAPHS)


def make_graphed_callables(callables, sample_args, num_warmup_iters=3, allow_unused_input=False, pool=None):
    raise RuntimeError(_NO_GRAPHS)
