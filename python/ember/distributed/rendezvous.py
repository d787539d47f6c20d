"""Where a process learns its rank, the world size and the store to meet at:
`init_method` URLs (env://, tcp://host:port, file:///path) and the
environment set by torchrun / ember.distributed.run (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT) or by Slurm's srun (SLURM_PROCID,
SLURM_NTASKS, SLURM_LOCALID, the first host of SLURM_NODELIST)."""
import os
import re
import urllib.parse

from .store import FileStore, TCPStore


def first_host(nodelist):
    """Slurm's compressed node list -> its first host name:
    "gpu[03-05,09],cpu1" -> "gpu03", "node7" -> "node7"."""
    nodelist = nodelist.strip()
    m = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist)
    if not m:
        raise ValueError(f"cannot parse SLURM_NODELIST {nodelist!r}")
    prefix, ranges = m.group(1), m.group(2)
    if ranges is None:
        return prefix
    first = ranges.split(",")[0].split("-")[0]
    return prefix + first


def _env_int(names, what):
    for n in names:
        v = os.environ.get(n)
        if v not in (None, ""):
            try:
                return int(v)
            except ValueError:
                raise ValueError(f"environment variable {n} must be an integer, got {v!r}") from None
    raise ValueError(
        f"Error initializing torch.distributed using env:// rendezvous: environment variable "
        f"{names[0]} expected, but not set" + (f" (nor {', '.join(names[1:])})" if names[1:] else ""))


def env_rank():
    return _env_int(["RANK", "SLURM_PROCID"], "rank")


def env_world_size():
    return _env_int(["WORLD_SIZE", "SLURM_NTASKS"], "world size")


def env_local_rank():
    return _env_int(["LOCAL_RANK", "SLURM_LOCALID"], "local rank")


def env_master_addr():
    addr = os.environ.get("MASTER_ADDR")
    if addr:
        return addr
    if os.environ.get("SLURM_NODELIST") or os.environ.get("SLURM_JOB_NODELIST"):
        return first_host(os.environ.get("SLURM_NODELIST") or os.environ["SLURM_JOB_NODELIST"])
    raise ValueError("Error initializing torch.distributed using env:// rendezvous: environment "
                     "variable MASTER_ADDR expected, but not set")


def env_master_port():
    return _env_int(["MASTER_PORT"], "master port")


def rendezvous(init_method, rank, world_size, timeout):
    """(store, rank, world_size) for an init_method URL."""
    url = urllib.parse.urlparse(init_method)
    q = dict(urllib.parse.parse_qsl(url.query))
    if rank is None or rank < 0:
        rank = int(q["rank"]) if "rank" in q else (env_rank() if url.scheme == "env" else None)
    if world_size is None or world_size < 0:
        world_size = (int(q["world_size"]) if "world_size" in q
                      else env_world_size() if url.scheme == "env" else None)
    if rank is None or world_size is None:
        raise ValueError(f"{init_method}: rank and world_size must be given (as arguments or in the URL)")
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"invalid rank {rank} for world size {world_size}")
    if url.scheme == "env":
        host, port = env_master_addr(), env_master_port()
    elif url.scheme == "tcp":
        host, port = url.hostname, url.port
        if not host or port is None:
            raise ValueError(f"{init_method}: expected tcp://host:port")
    elif url.scheme == "file":
        path = urllib.parse.unquote(url.path)
        if not path:
            raise ValueError(f"{init_method}: expected file:///path")
        store = FileStore(path, world_size)
        store.set_timeout(timeout)
        return store, rank, world_size
    else:
        raise ValueError(f"No rendezvous handler for {url.scheme}://")
    store = TCPStore(host, port, world_size, is_master=rank == 0, timeout=timeout,
                     wait_for_workers=False)
    return store, rank, world_size
