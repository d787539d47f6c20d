"""torch.jit.annotations: the names TorchScript annotations use, typing's and
BroadcastingListN (TorchScript's "T or a list of N T"; eagerly just T)."""
from typing import Any, Callable, Dict, List, Optional, Tuple, Union  # noqa: F401

__all__ = ["Any", "Callable", "Dict", "List", "Optional", "Tuple", "Union", "BroadcastingList1",
           "BroadcastingList2", "BroadcastingList3", "BroadcastingList4", "BroadcastingList5", "BroadcastingList6"]


class _BroadcastingList:
    def __getitem__(self, item):
        return item


BroadcastingList1 = BroadcastingList2 = BroadcastingList3 = _BroadcastingList()
BroadcastingList4 = BroadcastingList5 = BroadcastingList6 = BroadcastingList1
