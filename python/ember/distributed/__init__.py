"""ember.distributed — torch.distributed on ember.

Backends: "gloo" is ember's own CPU transport, written in C over TCP
(csrc/distributed; it is not the Gloo library, only torch's name for the
CPU backend). NCCL and MPI are not available in this build:
is_nccl_available() and is_mpi_available() say False and
init_process_group("nccl") raises.

Launch workers with `python -m ember.distributed.run --nproc-per-node N
script.py` (torchrun's flags and environment).

Sharded training: fsdp.FullyShardedDataParallel and fsdp.fully_shard (flat
parameter shards, fsdp/), and checkpoint.save/load of sharded state dicts
(checkpoint/). There is no DTensor or DeviceMesh: sharded values are
checkpoint.FlatShardedTensor, a rank's range of a flattened tensor."""
from ember._C import DistBackendError, DistError

from .store import DistNetworkError, DistStoreError, FileStore, HashStore, PrefixStore, Store, TCPStore
from .distributed_c10d import (
    Backend, GroupMember, P2POp, ProcessGroup, ReduceOp, Work, all_gather, all_gather_into_tensor,
    all_gather_object, all_reduce, all_to_all, all_to_all_single, barrier, batch_isend_irecv,
    broadcast, broadcast_object_list, default_pg_timeout, destroy_process_group, gather,
    gather_object, get_backend, get_global_rank, get_group_rank, get_node_local_rank,
    get_process_group_ranks, get_rank, get_world_size, group, init_process_group, irecv,
    is_available, is_backend_available, is_gloo_available, is_initialized, is_mpi_available,
    is_nccl_available, is_torchelastic_launched, is_ucc_available, isend, monitored_barrier,
    new_group, recv, reduce, reduce_op, reduce_scatter, reduce_scatter_tensor, scatter,
    scatter_object_list, send,
)
from . import distributed_c10d  # noqa: F401
