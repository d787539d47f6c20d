"""nn.utils.rnn: PackedSequence and its helpers (pack_padded_sequence,
pad_packed_sequence, pack_sequence, unpack_sequence), pad_sequence and
unpad_sequence, with torch's semantics.

A PackedSequence stores the steps of B sequences sorted longest first, step by
step: data (N, *) holds step 0 of every sequence, then step 1 of those still
running, ...; batch_sizes (T,) int64 says how many rows each step holds.
sorted_indices maps sorted position -> original batch index (None when the
input was already sorted) and unsorted_indices is its inverse.
"""
from collections import namedtuple

from ... import _C

__all__ = ["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pack_sequence",
           "unpack_sequence", "pad_sequence", "unpad_sequence", "invert_permutation"]


def invert_permutation(permutation):
    """The inverse of an int64 permutation (None stays None)."""
    if permutation is None:
        return None
    perm = [int(i) for i in permutation.tolist()]
    inv = [0] * len(perm)
    for pos, i in enumerate(perm):
        inv[i] = pos
    return _C.tensor(inv, device=permutation.device)


class PackedSequence(namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """What pack_padded_sequence / pack_sequence return; RNN, LSTM and GRU take it
    as input and return their output in the same form."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:  # (data, batch_sizes) passed as one tuple
            data, batch_sizes = data
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def _with_data(self, data, move_indices_to=None):
        s, u = self.sorted_indices, self.unsorted_indices
        if move_indices_to is not None:
            s = s.to(move_indices_to) if s is not None else None
            u = u.to(move_indices_to) if u is not None else None
        return type(self)(data, self.batch_sizes, s, u)

    def to(self, *args, **kwargs):
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        return self._with_data(data, data.device)

    def cuda(self, *args, **kwargs):
        data = self.data.cuda(*args, **kwargs)
        return self._with_data(data, data.device)

    def cpu(self):
        return self._with_data(self.data.cpu(), "cpu")

    def double(self):
        return self._with_data(self.data.double())

    def float(self):
        return self._with_data(self.data.float())

    def half(self):
        return self._with_data(self.data.half())

    def bfloat16(self):
        return self._with_data(self.data.bfloat16())

    def long(self):
        return self._with_data(self.data.long())

    def int(self):
        return self._with_data(self.data.int())

    def detach(self):
        return self._with_data(self.data.detach())

    @property
    def is_cuda(self):
        return self.data.is_cuda

    def is_pinned(self):
        return False


def _lengths_list(lengths):
    if isinstance(lengths, _C.Tensor):
        return [int(v) for v in lengths.reshape(-1).tolist()]
    return [int(v) for v in lengths]


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """input (T, B, *) (or (B, T, *) with batch_first), padded; lengths (B,).
    With enforce_sorted the lengths must decrease; otherwise the batch is sorted
    here and the permutation kept in sorted_indices."""
    lens = _lengths_list(lengths)
    batch_dim = 0 if batch_first else 1
    if len(lens) != input.shape[batch_dim]:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(lens)} "
                           f"(batch_size={input.shape[batch_dim]})")
    if enforce_sorted:
        if any(lens[i] < lens[i + 1] for i in range(len(lens) - 1)):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
                               "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
                               "pack_sequence to sidestep this requirement if you do not need ONNX "
                               "exportability.")
        sorted_indices = None
    else:
        order = sorted(range(len(lens)), key=lambda i: -lens[i])
        lens = [lens[i] for i in order]
        sorted_indices = _C.tensor(order, device=input.device)
        input = input.index_select(batch_dim, sorted_indices)
    if lens and lens[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in "
                           "'lengths' that is <= 0")
    if batch_first:
        input = input.transpose(0, 1)
    max_len = lens[0] if lens else 0
    if max_len > input.shape[0]:
        raise RuntimeError(f"Expected sequence length to be at most {input.shape[0]}, but got {max_len}")
    batch_sizes = [sum(1 for n in lens if n > t) for t in range(max_len)]
    data = _C.cat([input[t, :bs] for t, bs in enumerate(batch_sizes)], 0)
    return PackedSequence(data, _C.tensor(batch_sizes), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """The inverse of pack_padded_sequence: (padded (T, B, *) or (B, T, *), lengths (B,) int64),
    in the original batch order; rows past each length hold padding_value."""
    data, batch_sizes_t, sorted_indices, unsorted_indices = sequence
    batch_sizes = [int(b) for b in batch_sizes_t.tolist()]
    max_len = len(batch_sizes)
    if total_length is not None:
        if total_length < max_len:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in "
                             f"input, but got total_length={total_length} and max sequence length being {max_len}")
    else:
        total_length = max_len
    batch = batch_sizes[0] if batch_sizes else 0
    trailing = tuple(data.shape[1:])
    steps = data.split(batch_sizes, 0) if batch_sizes else []
    rows = []
    for bs, step in zip(batch_sizes, steps):
        if bs < batch:
            fill = _C.full((batch - bs,) + trailing, padding_value, dtype=data.dtype, device=data.device)
            step = _C.cat([step, fill], 0)
        rows.append(step)
    if total_length > max_len:
        rows.extend([_C.full((batch,) + trailing, padding_value, dtype=data.dtype, device=data.device)]
                    * (total_length - max_len))
    padded = _C.stack(rows, 0)
    lengths = [sum(1 for bs in batch_sizes if bs > b) for b in range(batch)]
    lengths = _C.tensor(lengths)
    if unsorted_indices is not None:
        padded = padded.index_select(1, unsorted_indices)
        lengths = lengths.index_select(0, unsorted_indices.cpu())
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, lengths


def pack_sequence(sequences, enforce_sorted=True):
    """Packs a list of (L_i, *) tensors (longest first unless enforce_sorted=False)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """A PackedSequence back to its list of (L_i, *) tensors, in the original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """A padded (T, B, *) (or (B, T, *)) tensor back to a list of (L_i, *) tensors."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [seq[:n] for seq, n in zip(padded_sequences.unbind(0), _lengths_list(lengths))]


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """(T, B, *) or, with batch_first, (B, T, *) where T is the longest length."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if isinstance(sequences, _C.Tensor):
        sequences = sequences.unbind(0)
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    trailing = tuple(sequences[0].shape[1:])
    for s in sequences:
        if tuple(s.shape[1:]) != trailing:
            raise RuntimeError(f"The size of tensor a ({trailing}) must match the size of tensor b "
                               f"({tuple(s.shape[1:])}) at non-singleton dimension 1")
    longest = max(s.shape[0] for s in sequences)
    rows = []
    for s in sequences:
        pad = longest - s.shape[0]
        if pad:
            fill = _C.full((pad,) + trailing, padding_value, dtype=s.dtype, device=s.device)
            s = _C.cat([s, fill] if padding_side == "right" else [fill, s])
        rows.append(s)
    return _C.stack(rows, 0 if batch_first else 1)
