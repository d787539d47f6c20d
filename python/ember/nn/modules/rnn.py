"""Recurrent layers (torch.nn's): RNNCell, LSTMCell, GRUCell and the multi-layer
RNN, LSTM, GRU, with torch's parameter names, shapes, initialization, errors and
PackedSequence inputs.

Everything is built from ember ops, so autograd runs through it. Per layer and
direction the input projection is one matmul for the whole sequence
(x (T, B, I) @ W_ih^T + b_ih -> (T, B, G)), which is then unbound into steps;
each step costs one h @ W_hh^T and a few elementwise ops.

Gate layouts (rows of W_ih / W_hh, each block hidden_size tall):
  RNN   h' = act(W_ih x + b_ih + W_hh h + b_hh)
  LSTM  i, f, g, o:  c' = f * c + i * g,  h' = o * tanh(c')  (then h' W_hr^T with proj_size)
  GRU   r, z, n:     n = tanh(W_in x + b_in + r * (W_hn h + b_hn)),  h' = (1 - z) * n + z * h
"""
import math
import numbers
import warnings

from ... import _C
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["RNNCellBase", "RNNCell", "LSTMCell", "GRUCell", "RNNBase", "RNN", "LSTM", "GRU"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


# ---- one time step of each cell: gi = W_ih x + b_ih, already computed ----

def _rnn_step(gi, h, w_hh, b_hh, relu):
    pre = gi + F.linear(h, w_hh, b_hh)
    return _C.relu(pre) if relu else _C.tanh(pre)


def _lstm_step(gi, h, c, w_hh, b_hh, w_hr):
    gates = gi + F.linear(h, w_hh, b_hh)
    i, f, g, o = gates.chunk(4, -1)
    c = _C.sigmoid(f) * c + _C.sigmoid(i) * _C.tanh(g)
    h = _C.sigmoid(o) * _C.tanh(c)
    if w_hr is not None:
        h = F.linear(h, w_hr)
    return h, c


def _gru_step(gi, h, w_hh, b_hh):
    gh = F.linear(h, w_hh, b_hh)
    i_r, i_z, i_n = gi.chunk(3, -1)
    h_r, h_z, h_n = gh.chunk(3, -1)
    r = _C.sigmoid(i_r + h_r)
    z = _C.sigmoid(i_z + h_z)
    n = _C.tanh(i_n + r * h_n)
    return n + z * (h - n)


def _check_size_arg(name, value):
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} should be of type int, got: {type(value).__name__}")


# ---- cells ----

class RNNCellBase(Module):
    """Holds weight_ih (G*H, I), weight_hh (G*H, H), bias_ih, bias_hh (G*H,)."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        g = num_chunks * hidden_size
        self.weight_ih = Parameter(_C.empty((g, input_size), device=device, dtype=dtype))
        self.weight_hh = Parameter(_C.empty((g, hidden_size), device=device, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(_C.empty(g, device=device, dtype=dtype))
            self.bias_hh = Parameter(_C.empty(g, device=device, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nl = getattr(self, "nonlinearity", "tanh")
        if nl != "tanh":
            s += f", nonlinearity={nl}"
        return s

    def _prepare(self, input, hx, names):
        """Checks input (I,) or (B, I) and the hidden states (names: their labels
        in torch's messages); returns (batched input, batched states, batched?)."""
        cls = type(self).__name__
        if input.dim() not in (1, 2):
            raise ValueError(f"{cls}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        for label, h in zip(names, hx):
            if h is not None and h.dim() not in (1, 2):
                raise ValueError(f"{cls}: Expected {label} to be 1D or 2D, got {h.dim()}D instead")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        if input.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[1]} "
                               f"expected {self.input_size}")
        out = []
        for k, h in enumerate(hx):
            if h is None:
                h = _C.zeros((input.shape[0], self.hidden_size), dtype=input.dtype, device=input.device)
            else:
                if not batched:
                    h = h.unsqueeze(0)
                if h.dim() != 2:
                    raise RuntimeError(f"Expected 2D hidden{k} (batch x hidden_size), but got {h.dim()}D tensor")
                if h.shape[0] != input.shape[0]:
                    raise RuntimeError(f"Input batch size {input.shape[0]} doesn't match hidden{k} "
                                       f"batch size {h.shape[0]}")
                if h.shape[1] != self.hidden_size:
                    raise RuntimeError(f"hidden{k} has inconsistent hidden_size: got {h.shape[1]}, "
                                       f"expected {self.hidden_size}")
            out.append(h)
        return input, out, batched


class RNNCell(RNNCellBase):
    """h' = tanh(W_ih x + b_ih + W_hh h + b_hh) (or relu)."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        x, (h,), batched = self._prepare(input, (hx,), ("hidden",))
        gi = F.linear(x, self.weight_ih, self.bias_ih)
        h = _rnn_step(gi, h, self.weight_hh, self.bias_hh, self.nonlinearity == "relu")
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """Gates i, f, g, o; returns (h', c')."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        if hx is None:
            hx = (None, None)
        elif len(hx) != 2:
            raise RuntimeError("lstm_cell expects two hidden states")
        x, (h, c), batched = self._prepare(input, tuple(hx), ("hx[0]", "hx[1]"))
        gi = F.linear(x, self.weight_ih, self.bias_ih)
        h, c = _lstm_step(gi, h, c, self.weight_hh, self.bias_hh, None)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """Gates r, z, n; n = tanh(W_in x + b_in + r * (W_hn h + b_hn))."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        x, (h,), batched = self._prepare(input, (hx,), ("hidden",))
        gi = F.linear(x, self.weight_ih, self.bias_ih)
        h = _gru_step(gi, h, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)


# ---- multi-layer recurrent networks ----

class RNNBase(Module):
    """The shared part of RNN / LSTM / GRU: parameters per layer and direction,
    named weight_ih_l{k}[_reverse], weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k},
    weight_hr_l{k} (LSTM with proj_size), in that order."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
                or not 0 <= dropout <= 1):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero "
                          f"dropout expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={num_layers}")
        _check_size_arg("hidden_size", hidden_size)
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError(f"Unrecognized RNN mode: {mode}")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        gate_size = _GATES[mode] * hidden_size
        num_dirs = 2 if bidirectional else 1
        real_hidden = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            layer_in = input_size if layer == 0 else real_hidden * num_dirs
            for d in range(num_dirs):
                sfx = f"_l{layer}" + ("_reverse" if d == 1 else "")
                shapes = [("weight_ih", (gate_size, layer_in)), ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                names = []
                for base, shape in shapes:
                    setattr(self, base + sfx, Parameter(_C.empty(shape, device=device, dtype=dtype)))
                    names.append(base + sfx)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def flatten_parameters(self):
        """torch's API: packs weights for cuDNN there; ember keeps them as they are."""

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # -- forward --

    def _layer_weights(self, layer, d):
        sfx = f"_l{layer}" + ("_reverse" if d == 1 else "")
        get = lambda base: getattr(self, base + sfx, None)  # noqa: E731
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"), get("weight_hr")

    def _step(self, gi, state, w_hh, b_hh, w_hr):
        """One step; state is a tuple (h,) or (h, c); returns (output, new state)."""
        if self.mode == "LSTM":
            h, c = _lstm_step(gi, state[0], state[1], w_hh, b_hh, w_hr)
            return h, (h, c)
        if self.mode == "GRU":
            h = _gru_step(gi, state[0], w_hh, b_hh)
        else:
            h = _rnn_step(gi, state[0], w_hh, b_hh, self.mode == "RNN_RELU")
        return h, (h,)

    def _run_padded(self, gi, state, w_hh, b_hh, w_hr, reverse, time_dim):
        """gi (T, B, G), or (B, T, G) with time_dim 1: the input projection of
        every step. Returns the outputs (T, B, H_out) (or (B, T, H_out)) and
        the final state."""
        steps = gi.unbind(time_dim)
        order = range(len(steps) - 1, -1, -1) if reverse else range(len(steps))
        outs = [None] * len(steps)
        for t in order:
            outs[t], state = self._step(steps[t], state, w_hh, b_hh, w_hr)
        return _C.stack(outs, time_dim), state

    def _run_packed(self, gi, state, w_hh, b_hh, w_hr, reverse, batch_sizes):
        """gi (N, G): packed steps, step t holding batch_sizes[t] rows (the
        sequences still running, longest first). Each sequence's final state is
        taken at its own last step. Returns the packed outputs (N, H_out) and
        the final state (B rows)."""
        steps = gi.split(batch_sizes, 0)
        outs = [None] * len(steps)
        if not reverse:
            done = []  # rows that finished, cut off as the batch shrinks
            for t, bs in enumerate(batch_sizes):
                rows = state[0].shape[0]
                if bs < rows:
                    done.append(tuple(s[bs:] for s in state))
                    state = tuple(s[:bs] for s in state)
                outs[t], state = self._step(steps[t], state, w_hh, b_hh, w_hr)
            parts = [state] + done[::-1]
            state = tuple(_C.cat([p[k] for p in parts], 0) if len(parts) > 1 else state[k]
                          for k in range(len(state)))
        else:
            init_state = state
            cur = batch_sizes[-1]
            state = tuple(s[:cur] for s in init_state)
            for t in range(len(steps) - 1, -1, -1):
                bs = batch_sizes[t]
                if bs > cur:  # longer sequences start their reverse pass here
                    state = tuple(_C.cat([s, s0[cur:bs]], 0) for s, s0 in zip(state, init_state))
                    cur = bs
                outs[t], state = self._step(steps[t], state, w_hh, b_hh, w_hr)
        return _C.cat(outs, 0), state

    @staticmethod
    def _check_hx_dims(hx, is_lstm, batched):
        """h0 (and c0) must have the input's rank: 3-d when batched, else 2-d."""
        want, kind = (3, "batched 3-D") if batched else (2, "unbatched 2-D")
        hs = hx if is_lstm else (hx,)
        if any(h.dim() != want for h in hs):
            if is_lstm:
                got = ", ".join(f"{h.dim()}-D" for h in hs)
                raise RuntimeError(f"For {kind} input, hx and cx should also be {want}-D but got ({got}) tensors")
            raise RuntimeError(f"For {kind} input, hx should also be {want}-D but got {hx.dim()}-D tensor")

    def _check_hidden(self, h, expected, label):
        if tuple(h.shape) != expected:
            raise RuntimeError(f"Expected {label} size {expected}, got {list(h.shape)}")

    def forward(self, input, hx=None):
        from ..utils.rnn import PackedSequence
        is_lstm = self.mode == "LSTM"
        num_dirs = 2 if self.bidirectional else 1
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        packed = isinstance(input, PackedSequence)
        batched = True
        if packed:
            x, batch_sizes_t, sorted_indices, unsorted_indices = input
            batch_sizes = [int(b) for b in batch_sizes_t.tolist()]
            max_batch = batch_sizes[0]
            if hx is not None and sorted_indices is not None:
                hx = (tuple(h.index_select(1, sorted_indices) for h in hx) if is_lstm
                      else hx.index_select(1, sorted_indices))
        else:
            x = input
            sorted_indices = unsorted_indices = None
            if x.dim() not in (2, 3):
                raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got {x.dim()}D "
                                 f"tensor instead")
            batched = x.dim() == 3
            if hx is not None:
                self._check_hx_dims(hx, is_lstm, batched)
            if not batched:
                x = x.unsqueeze(1)
                if hx is not None:
                    hx = tuple(h.unsqueeze(1) for h in hx) if is_lstm else hx.unsqueeze(1)
            if x.shape[-1] != self.input_size:
                raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                                   f"got {x.shape[-1]}")
            # batch_first input stays (B, T, I): steps are taken along dim 1 and the
            # output is built (B, T, *) contiguous, as torch returns it
            time_dim = 1 if (batched and self.batch_first) else 0
            if x.shape[time_dim] == 0:
                raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
            max_batch = x.shape[1 - time_dim]
        if packed and x.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {x.shape[-1]}")

        w_dtype = self.weight_ih_l0.dtype
        if x.dtype != w_dtype:
            raise ValueError(f"RNN input dtype ({x.dtype}) does not match weight dtype ({w_dtype}). Convert input: "
                             f"input.to({w_dtype}), or convert model: model.to({x.dtype})")
        n_states = self.num_layers * num_dirs
        h_shape = (n_states, max_batch, real_hidden)
        c_shape = (n_states, max_batch, self.hidden_size)
        if hx is None:
            h0 = _C.zeros(h_shape, dtype=x.dtype, device=x.device)
            c0 = _C.zeros(c_shape, dtype=x.dtype, device=x.device) if is_lstm else None
        elif is_lstm:
            h0, c0 = hx[0], hx[1]  # a shorter tuple: IndexError, as torch
            self._check_hidden(h0, h_shape, "hidden[0]")
            self._check_hidden(c0, c_shape, "hidden[1]")
        else:
            h0 = hx
            self._check_hidden(h0, h_shape, "hidden")
        h0s = h0.unbind(0)
        c0s = c0.unbind(0) if is_lstm else None

        layer_in = x
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(num_dirs):
                k = layer * num_dirs + d
                w_ih, w_hh, b_ih, b_hh, w_hr = self._layer_weights(layer, d)
                gi = F.linear(layer_in, w_ih, b_ih)  # all steps in one matmul
                state = (h0s[k], c0s[k]) if is_lstm else (h0s[k],)
                if packed:
                    out, state = self._run_packed(gi, state, w_hh, b_hh, w_hr, d == 1, batch_sizes)
                else:
                    out, state = self._run_padded(gi, state, w_hh, b_hh, w_hr, d == 1, time_dim)
                outs.append(out)
                h_n.append(state[0])
                if is_lstm:
                    c_n.append(state[1])
            layer_in = outs[0] if num_dirs == 1 else _C.cat(outs, -1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_in = F.dropout(layer_in, self.dropout, training=True)
        output = layer_in
        h_n = _C.stack(h_n, 0)
        c_n = _C.stack(c_n, 0) if is_lstm else None

        if packed:
            output = PackedSequence(output, batch_sizes_t, sorted_indices, unsorted_indices)
            if unsorted_indices is not None:
                h_n = h_n.index_select(1, unsorted_indices)
                if is_lstm:
                    c_n = c_n.index_select(1, unsorted_indices)
        elif not batched:
            output = output.squeeze(1)
            h_n = h_n.squeeze(1)
            if is_lstm:
                c_n = c_n.squeeze(1)
        return (output, (h_n, c_n)) if is_lstm else (output, h_n)


class RNN(RNNBase):
    """Elman RNN: RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True,
    batch_first=False, dropout=0.0, bidirectional=False)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(mode, *args, **kwargs)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, proj_size=0); returns (output, (h_n, c_n))."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)


class GRU(RNNBase):
    """GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)
