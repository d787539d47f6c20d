"""nn.utils.rnn.pad_sequence: stack variable-length sequences, padding the ends."""
from ... import _C

__all__ = ["pad_sequence"]


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
