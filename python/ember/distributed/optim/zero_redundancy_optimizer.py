"""ZeroRedundancyOptimizer (ZeRO stage 1, as torch.distributed.optim has it).

Each rank owns a share of the parameters and keeps the optimizer state of
its share only, so the state's memory is divided by the world size. step()
runs the wrapped optimizer on the rank's own share (its gradients are the
full, already averaged ones: DDP or an all_reduce did that), then every rank
broadcasts the parameters it owns to the others, so all ranks end the step
with the same parameters. The partition is torch's: within each parameter
group, largest parameters first, each to the rank holding the fewest
elements so far (counted across groups).

Not available: overlap_with_ddp (it runs the step inside DDP's communication
hook) and the Join hook."""
import copy

import ember

from ... import distributed as dist
from ...optim.optimizer import Optimizer

__all__ = ["ZeroRedundancyOptimizer"]


class ZeroRedundancyOptimizer(Optimizer):
    def __init__(self, params, optimizer_class, process_group=None, parameters_as_bucket_view=False,
                 overlap_with_ddp=False, **defaults):
        if overlap_with_ddp:
            raise NotImplementedError("ZeroRedundancyOptimizer(overlap_with_ddp=True) runs the step inside DDP's "
                                      "communication hook, which ember's DDP does not offer")
        if not (isinstance(optimizer_class, type) and issubclass(optimizer_class, Optimizer)):
            raise TypeError(f"optimizer_class must be an Optimizer subclass, got {optimizer_class!r}")
        self._initialized = False
        super().__init__(params, defaults)
        self._optim_constructor = optimizer_class
        self._optim_defaults = defaults
        self.process_group = process_group if process_group is not None else dist.group.WORLD
        if self.process_group is None:
            raise RuntimeError("ZeroRedundancyOptimizer needs an initialized process group: call "
                               "ember.distributed.init_process_group first")
        self.world_size = dist.get_world_size(self.process_group)
        self.rank = dist.get_rank(self.process_group)
        self.global_rank = dist.get_global_rank(self.process_group, self.rank) \
            if self.process_group is not dist.group.WORLD else self.rank
        self.parameters_as_bucket_view = parameters_as_bucket_view
        self._sizes = [0] * self.world_size
        self._owner = {}  # id(param) -> the rank that updates it
        self._per_rank = [[] for _ in range(self.world_size)]  # per rank, per group: its params
        for group in self.param_groups:
            self._partition(group)
        self.optim = optimizer_class(self._local_groups(range(len(self.param_groups))), **defaults)
        self._buckets = None
        if parameters_as_bucket_view:
            self._build_buckets()
        self._all_state_dicts = []
        self._initialized = True

    # ------------------------------------------------------------ partition

    def _partition(self, group):
        shares = [[] for _ in range(self.world_size)]
        for p in sorted(group["params"], key=lambda t: t.numel(), reverse=True):
            rank = min(range(self.world_size), key=lambda r: self._sizes[r])
            shares[rank].append(p)
            self._sizes[rank] += p.numel()
            self._owner[id(p)] = rank
        # keep the group's own order within each share
        order = {id(p): i for i, p in enumerate(group["params"])}
        for r in range(self.world_size):
            self._per_rank[r].append(sorted(shares[r], key=lambda t: order[id(t)]))

    def _local_groups(self, indices):
        out = []
        for gi in indices:
            g = {k: v for k, v in self.param_groups[gi].items() if k != "params"}
            g["params"] = list(self._per_rank[self.rank][gi])
            out.append(g)
        return out

    def _build_buckets(self):
        """Each rank's share as views into one flat tensor per dtype, so the
        end of a step is one broadcast per rank and dtype."""
        self._buckets = []
        for r in range(self.world_size):
            by_dtype = {}
            for share in self._per_rank[r]:
                for p in share:
                    by_dtype.setdefault(p.dtype, []).append(p)
            buckets = []
            for dtype, ps in by_dtype.items():
                flat = ember.empty(sum(p.numel() for p in ps), dtype=dtype)
                off = 0
                with ember.no_grad():
                    for p in ps:
                        n = p.numel()
                        flat[off:off + n].copy_(p.detach().reshape(-1))
                        p.data = flat[off:off + n].view(p.shape)
                        off += n
                buckets.append(flat)
            self._buckets.append(buckets)

    # ------------------------------------------------------------ stepping

    def _sync_hyperparameters(self):
        """Options changed on the global groups (an LR scheduler) reach the
        local optimizer's groups."""
        for g, lg in zip(self.param_groups, self.optim.param_groups):
            for k, v in g.items():
                if k != "params":
                    lg[k] = v

    def _sync_parameters(self):
        src_of = (lambda r: r) if self.process_group is dist.group.WORLD else \
            (lambda r: dist.get_global_rank(self.process_group, r))
        with ember.no_grad():
            for r in range(self.world_size):
                if self._buckets is not None:
                    for flat in self._buckets[r]:
                        dist.broadcast(flat, src=src_of(r), group=self.process_group)
                    continue
                ps = [p for share in self._per_rank[r] for p in share]
                by_dtype = {}
                for p in ps:
                    by_dtype.setdefault(p.dtype, []).append(p)
                for dtype, group in by_dtype.items():
                    flat = ember.cat([p.detach().reshape(-1) for p in group])
                    dist.broadcast(flat, src=src_of(r), group=self.process_group)
                    if r != self.rank:
                        off = 0
                        for p in group:
                            n = p.numel()
                            p.detach().copy_(flat[off:off + n].view(p.shape))
                            off += n

    def step(self, closure=None, **kwargs):
        self._sync_hyperparameters()
        loss = self.optim.step(closure=closure, **kwargs) if closure is not None else self.optim.step(**kwargs)
        self._sync_parameters()
        return loss

    def add_param_group(self, param_group):
        if not getattr(self, "_initialized", False):  # Optimizer.__init__ adding the first groups
            return super().add_param_group(param_group)
        if self.parameters_as_bucket_view:
            raise RuntimeError("ZeroRedundancyOptimizer.add_param_group: not supported with "
                               "parameters_as_bucket_view=True in ember")
        super().add_param_group(param_group)
        self._partition(self.param_groups[-1])
        self.optim.add_param_group(self._local_groups([len(self.param_groups) - 1])[0])

    # ------------------------------------------------------------ state dicts

    def _global_index(self):
        """(rank, local index) -> global index, in torch's state-dict numbering."""
        glob = {}
        i = 0
        for g in self.param_groups:
            for p in g["params"]:
                glob[id(p)] = i
                i += 1
        table = {}
        for r in range(self.world_size):
            j = 0
            for share in self._per_rank[r]:
                for p in share:
                    table[(r, j)] = glob[id(p)]
                    j += 1
        return table

    def consolidate_state_dict(self, to=0):
        """Collect every rank's share of the state on rank `to` (a collective:
        call it on all ranks)."""
        self._all_state_dicts = []
        local = self.optim.state_dict()
        gathered = [None] * self.world_size if self.rank == to else None
        dst = to if self.process_group is dist.group.WORLD else dist.get_global_rank(self.process_group, to)
        dist.gather_object(local, gathered, dst=dst, group=self.process_group)
        if self.rank == to:
            self._all_state_dicts = gathered

    def state_dict(self):
        if not self._all_state_dicts:
            raise RuntimeError(f"Optimizer state has not been consolidated on this rank. Please call "
                               f"`consolidate_state_dict(to={self.rank})` on all ranks beforehand if you "
                               f"meant to save the global state.")
        table = self._global_index()
        state = {}
        for r, sd in enumerate(self._all_state_dicts):
            for j, s in sd["state"].items():
                state[table[(r, int(j))]] = s
        groups = []
        start = 0
        for gi, g in enumerate(self.param_groups):
            out = {k: v for k, v in g.items() if k != "params"}
            # options the wrapped optimizer keeps in its groups (initial_lr, ...)
            for sd in self._all_state_dicts:
                for k, v in sd["param_groups"][gi].items():
                    if k != "params":
                        out.setdefault(k, v)
            out["params"] = list(range(start, start + len(g["params"])))
            start += len(g["params"])
            groups.append(out)
        return {"state": dict(sorted(state.items())), "param_groups": groups}

    def load_state_dict(self, state_dict):
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for g, sg in zip(self.param_groups, groups):
            if len(g["params"]) != len(sg["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match the size "
                                 "of optimizer's group")
        table = self._global_index()
        local_state = {}
        j = 0
        for share in self._per_rank[self.rank]:
            for _ in share:
                gidx = table[(self.rank, j)]
                saved = state_dict["state"].get(gidx, state_dict["state"].get(str(gidx)))
                if saved is not None:
                    local_state[j] = copy.deepcopy(saved)
                j += 1
        local_groups = []
        j = 0
        for gi, sg in enumerate(groups):
            lg = {k: v for k, v in sg.items() if k != "params"}
            n = len(self._per_rank[self.rank][gi])
            lg["params"] = list(range(j, j + n))
            j += n
            local_groups.append(lg)
            for k, v in sg.items():
                if k != "params":
                    self.param_groups[gi][k] = v
        self.optim.load_state_dict({"state": local_state, "param_groups": local_groups})
