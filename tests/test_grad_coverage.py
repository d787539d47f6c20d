"""Autograd coverage of the public API (no path may silently drop the graph).

Every name of the public tensor-returning API that torch also has — Tensor
methods, properties and operator dunders, ember.<fn>, ember.nn.functional,
ember.linalg, ember.special — is called with small float64 inputs that
require grad (argument recipes: RECIPES, a table keyed by recipe name; TABLE
says which recipe each name takes), as are the hand-written CASES (indexing
forms, views of non-leaves, in-place writes into views of clones, iteration,
splitting, dtype conversions, dunders, the nn.functional calls of common
models). For each:

* whether the result requires grad is checked against torch's, recorded in
  TABLE / CASES ('d': it does, 'n': it does not) — so the check runs without
  torch too;
* the gradient of sum(result * fixed random weights) with respect to every
  input is checked against torch's when torch is installed, and against
  central finite differences otherwise ('r' entries are random draws: only
  the first check applies; 'x': torch's backward raises, so has no reference).

The TABLE was recorded from torch 2.x with the recipe torch first accepted;
with torch installed, every check also re-compares the recorded expectation
(and each output's requires_grad and shape) with torch's.
"""
import math
import warnings

import numpy as np
import pytest

import ember

try:
    import torch
except ImportError:  # the checks below then use finite differences
    torch = None


# ---------------------------------------------------------------------------
# inputs: float64 arrays in (0.15, 0.85) (inside every domain the table's
# functions have: log, sqrt, asin, atanh, logit, ...), and index tensors
def _arrays():
    r = np.random.default_rng(0)
    u = lambda *s: r.uniform(0.15, 0.85, s)  # noqa: E731
    A = dict(x34=u(3, 4), y34=u(3, 4), z34=u(3, 4), x44=u(4, 4) + 2 * np.eye(4), y44=u(4, 4), y43=u(4, 3),
             x4=u(4), y4=u(4), x234=u(2, 3, 4), img=u(1, 2, 5, 5), w2=u(3, 2, 3, 3), seq=u(1, 2, 6),
             w1=u(3, 2, 3), b3=u(3), b33=u(3, 3), b233=u(2, 3, 3), y243=u(2, 4, 3), x3=u(3), bw=u(2, 4, 4),
             b2=u(2), pd=u(4, 4), w43=u(3, 4), s=np.array(r.uniform(0.15, 0.85)))
    A["pd"] = A["pd"] @ A["pd"].T + 4 * np.eye(4)
    return A


ARRAYS = _arrays()


class Inputs(dict):
    """The tensors of one call, made on first use (so a call's leaves are the
    arrays it reads): float arrays as float64 leaves requiring grad."""

    def __init__(self, L, arrays=None, grad=True):
        super().__init__()
        self.L, self.arrays, self.grad = L, arrays if arrays is not None else ARRAYS, grad

    def __missing__(self, k):
        L = self.L
        fixed = {"idx": [0, 2], "idx2": [[0, 1, 3, 2], [1, 1, 0, 3], [3, 2, 1, 0]], "tgt": [0, 3, 1]}
        if k in fixed:
            t = L.tensor(fixed[k])
        elif k == "mask":
            t = L.tensor(ARRAYS["x34"] > 0.5)
        elif k == "rm":
            t = L.zeros(4, dtype=L.float64)
        elif k == "rv":
            t = L.ones(4, dtype=L.float64)
        elif k == "c4":  # a float input that does not require grad (class weights)
            t = L.tensor([0.5, 1.0, 2.0, 1.5], dtype=L.float64)
        else:
            t = L.tensor(self.arrays[k], dtype=L.float64, requires_grad=self.grad)
        self[k] = t
        return t

    def leaves(self):
        return [k for k, t in self.items() if k in self.arrays]


# argument recipes, keyed by name: T is an Inputs
RECIPES = {
    "x": lambda T: (T["x34"],), "xy": lambda T: (T["x34"], T["y34"]), "x,1": lambda T: (T["x34"], 1),
    "mm": lambda T: (T["x34"], T["y43"]), "sq": lambda T: (T["x44"],), "sq2": lambda T: (T["x44"], T["y44"]),
    "x,.5": lambda T: (T["x34"], 0.5), "x,-1": lambda T: (T["x34"], -1), "x,0,1": lambda T: (T["x34"], 0, 1),
    "[xy]": lambda T: ([T["x34"], T["y34"]],), "[xy],0": lambda T: ([T["x34"], T["y34"]], 0),
    "xyz": lambda T: (T["x34"], T["y34"], T["z34"]), "3d": lambda T: (T["x234"],),
    "conv2": lambda T: (T["img"], T["w2"]), "img": lambda T: (T["img"],), "img,2": lambda T: (T["img"], 2),
    "conv1": lambda T: (T["seq"], T["w1"]), "seq": lambda T: (T["seq"],), "seq,2": lambda T: (T["seq"], 2),
    "vv": lambda T: (T["x4"], T["y4"]), "v": lambda T: (T["x4"],), "pd": lambda T: (T["pd"],),
    "x,(4,3)": lambda T: (T["x34"], (4, 3)), "x,(12,)": lambda T: (T["x34"], (12,)),
    "x,[0,2]": lambda T: (T["x34"], [0, 2]), "x,2": lambda T: (T["x34"], 2),
    "xy,.5": lambda T: (T["x34"], T["y34"], 0.5), "x,b3": lambda T: (T["x34"], T["b3"]),
    "x,idx": lambda T: (T["x34"], T["idx"]), "x,0,idx": lambda T: (T["x34"], 0, T["idx"]),
    "x,1,idx2": lambda T: (T["x34"], 1, T["idx2"]), "x,mask": lambda T: (T["x34"], T["mask"]),
    "mask,x,y": lambda T: (T["mask"], T["x34"], T["y34"]), "x,(2,2)": lambda T: (T["x34"], (2, 2)),
    "xyz,.5": lambda T: (T["x34"], T["y34"], T["z34"], 0.5), "x,tgt": lambda T: (T["x34"], T["tgt"]),
    "x,ptgt": lambda T: (T["x34"], T["y34"].detach()), "vv,.5": lambda T: (T["x4"], T["y4"], 0.5),
    "v,1": lambda T: (T["x4"], 1), "x,6": lambda T: (T["x34"], 6), "x,(3,4)": lambda T: (T["x34"], (3, 4)),
    "x,0,0,2": lambda T: (T["x34"], 0, 0, 2), "xy,1": lambda T: (T["x34"], T["y34"], 1),
    "b3,x,y43": lambda T: (T["b3"].reshape(3, 1).expand(3, 3), T["x34"], T["y43"]),
    "x,0,idx,y": lambda T: (T["x34"], 0, T["idx"], T["y34"][:2]),
    "x,1,0": lambda T: (T["x34"], 1, 0), "x,2,1": lambda T: (T["x34"], 2, 1),
    "lin": lambda T: (T["x34"], T["w43"], T["b3"]), "x,w43": lambda T: (T["x34"], T["w43"]),
    "x,x4": lambda T: (T["x34"], T["x4"]), "x,(3,1,4)": lambda T: (T["x34"], (3, 1, 4)),
    "x,0,2": lambda T: (T["x34"], 0, 2), "s": lambda T: (T["s"],), "x,s": lambda T: (T["x34"], T["s"]),
    "sq,v": lambda T: (T["x44"], T["x4"]), "x,y43": lambda T: (T["x34"], T["y43"]),
    "x,1,1,2": lambda T: (T["x34"], 1, 1, 2), "ein": lambda T: ("ij,jk->ik", T["x34"], T["y43"]),
    "x,2,.5": lambda T: (T["x34"], 2, 0.5), "x,.2,.8": lambda T: (T["x34"], 0.2, 0.8),
    "x,1,-1": lambda T: (T["x34"], 1, -1), "x,(1,)": lambda T: (T["x34"], (1,)),
    "x,[1,2]": lambda T: (T["x34"], [1, 2]), "x,1,[1,2]": lambda T: (T["x34"], 1, [1, 2]),
    "bmm": lambda T: (T["x234"], T["y243"]), "addbmm": lambda T: (T["b33"], T["x234"], T["y243"]),
    "baddbmm": lambda T: (T["b233"], T["x234"], T["y243"]), "addmv": lambda T: (T["x3"], T["x34"], T["x4"]),
    "addr": lambda T: (T["x34"], T["x3"], T["x4"]), "as_strided": lambda T: (T["x34"], (2, 2), (1, 2)),
    "index_fill": lambda T: (T["x34"], 0, T["idx"], 0.5),
    "index_put": lambda T: (T["x34"], (T["idx"],), T["y34"][:2]),
    "masked_fill": lambda T: (T["x34"], T["mask"], 0.5), "masked_scatter": lambda T: (T["x34"], T["mask"], T["y34"]),
    "scatter": lambda T: (T["x34"], 1, T["idx2"], T["y34"]),
    "scatter_reduce": lambda T: (T["x34"], 1, T["idx2"], T["y34"], "sum"),
    "unflatten": lambda T: (T["x34"], 1, (2, 2)), "permute": lambda T: (T["x34"], (1, 0)),
    "where_m": lambda T: (T["x34"], T["mask"], T["y34"]), "new_full": lambda T: (T["x34"], (2, 2), 0.5),
    "batch_norm": lambda T: (T["x34"], T["rm"], T["rv"], T["x4"], T["y4"], True),
    "bilinear": lambda T: (T["x34"], T["y34"], T["bw"], T["b2"]), "embedding": lambda T: (T["idx"], T["x34"]),
}

# Preferred recipes where torch's first accepted one is an odd call (a 2-D input to a 2-d pool, a bool target).
PREFER = {"adaptive_avg_pool2d": "img,2", "adaptive_max_pool2d": "img,2", "dropout1d": "seq", "dropout2d": "img",
          "dropout3d": "img", "feature_alpha_dropout": "img", "mse_loss": "xy", "smooth_l1_loss": "xy",
          "trapezoid": "vv", "cumulative_trapezoid": "vv"}

NAMESPACES = {"torch": lambda L: L, "F": lambda L: L.nn.functional, "linalg": lambda L: L.linalg,
              "special": lambda L: L.special}


def table_call(ns, name, recipe):
    """fn(L, T): the call the TABLE row describes. In-place variants write into
    a clone of the first input (a leaf can't be written)."""
    def fn(L, T):
        args = RECIPES[recipe](T)
        inplace = name.endswith("_") and not name.startswith("__") or name.startswith("__i")
        if inplace and isinstance(args[0], L.Tensor):
            args = (args[0].clone(),) + tuple(args[1:])
        if ns == "M":
            attr = getattr(args[0], name)
            return attr(*args[1:]) if callable(attr) else attr
        return getattr(NAMESPACES[ns](L), name)(*args)
    return fn
# namespace name recipe expect — recorded from torch 2.x (see the module docstring)
TABLE = """
torch Tensor x d | torch abs x d | torch absolute x d | torch acos x d | torch acosh x d | torch add xy d
torch addbmm addbmm d | torch addcdiv masked_scatter d | torch addcmul masked_scatter d
torch addmm b3,x,y43 d | torch addmv addmv d | torch addr addr d | torch amax permute d
torch amin permute d | torch aminmax x d | torch as_strided as_strided d | torch as_tensor x d
torch asarray x d | torch asin x d | torch asinh x d | torch atan x d | torch atan2 xy d | torch atanh x d
torch baddbmm addbmm d | torch bernoulli x dr | torch block_diag addmv d | torch bmm bmm d
torch broadcast_tensors masked_scatter d | torch broadcast_to x,(3,4) d | torch cartesian_prod vv d
torch cat [xy] d | torch cdist xy d | torch ceil x d | torch celu x d | torch chunk x,1 d
torch clamp masked_scatter d | torch clamp_max xy d | torch clamp_min xy d | torch clip masked_scatter d
torch clone x d | torch column_stack [xy] d | torch combinations v d | torch concat [xy] d
torch concatenate [xy] d | torch copysign xy d | torch cos x d | torch cosh x d | torch cummax x,1 d
torch cummin x,1 d | torch cumprod x,1 d | torch cumsum x,1 d | torch cumulative_trapezoid vv d
torch deg2rad x d | torch detach x n | torch diag x d | torch diag_embed x d | torch diagonal x d
torch diff x d | torch dist xy d | torch div xy d | torch dot vv d | torch dstack [xy] d
torch einsum permute d | torch embedding x,idx d | torch empty_like x n | torch erf x d | torch erfc x d
torch erfinv x d | torch exp x d | torch exp2 x d | torch expm1 x d | torch fix x d | torch flatten x d
torch flip permute d | torch fliplr x d | torch flipud x d | torch float_power xy d | torch floor x d
torch floor_divide xy dx | torch fmax xy d | torch fmin xy d | torch fmod xy d | torch frac x d
torch frexp x d | torch full_like x,1 n | torch gather x,1,idx2 d | torch ger vv d | torch heaviside xy dx
torch histc x n | torch hstack [xy] d | torch hypot xy d | torch i0 x d | torch index_add x,0,idx,y d
torch index_copy x,0,idx,y d | torch index_fill index_fill d | torch index_put index_put d
torch index_select x,0,idx d | torch inner xy d | torch kron bmm d | torch kthvalue x,1 d | torch ldexp xy d
torch lerp xyz d | torch log x d | torch log10 x d | torch log1p x d | torch log2 x d
torch log_softmax x,1 d | torch logaddexp xy d | torch logcumsumexp x,1 d | torch logit x d
torch logsumexp permute d | torch masked_fill masked_fill d | torch masked_scatter masked_scatter d
torch masked_select x,mask d | torch matmul bmm d | torch max x d | torch maximum xy d | torch mean permute d
torch median x d | torch meshgrid vv d | torch min x d | torch minimum xy d | torch mm mm d | torch mode x d
torch moveaxis x,0,1 d | torch movedim x,0,1 d | torch msort x d | torch mul xy d | torch mv x,x4 d
torch nan_to_num x d | torch nanmean permute d | torch nanmedian x d | torch nansum permute d
torch narrow x,0,0,2 d | torch neg x d | torch negative x d | torch norm x d | torch normal x dr
torch ones_like x n | torch outer vv d | torch permute permute d | torch positive x d | torch pow xy d
torch prod x d | torch rad2deg x d | torch rand_like x n | torch randint_like x,1 n | torch randn_like x n
torch ravel x d | torch reciprocal x d | torch relu x d | torch remainder xy d
torch repeat_interleave x,1 d | torch reshape x,(4,3) d | torch roll x,1 d | torch rot90 x d
torch round x d | torch row_stack [xy] d | torch rsqrt x d | torch rsub xy d | torch scatter scatter d
torch scatter_add scatter d | torch scatter_reduce scatter_reduce d | torch select x,0,1 d | torch selu x d
torch sgn x dx | torch sigmoid x d | torch sign x d | torch sin x d | torch sinc x d | torch sinh x d
torch softmax x,1 d | torch sort x d | torch split x,1 d | torch sqrt x d | torch square x d
torch squeeze permute d | torch stack [xy] d | torch std permute d | torch std_mean permute d
torch sub xy d | torch sum permute d | torch swapaxes x,0,1 d | torch swapdims x,0,1 d | torch t x d
torch take x,idx d | torch take_along_dim x,idx d | torch tan x d | torch tanh x d | torch tensor x n
torch tensor_split permute d | torch tensordot xy d | torch threshold x,0,1 d | torch tile permute d
torch topk x,1 d | torch trace x d | torch transpose x,0,1 d | torch trapezoid vv d | torch tril x d
torch triu x d | torch true_divide xy d | torch trunc x d | torch unbind x d | torch unflatten unflatten d
torch unique x dx | torch unique_consecutive x dx | torch unsqueeze x,1 d | torch vander v dx
torch var permute d | torch var_mean permute d | torch vdot vv d | torch vstack [xy] d | torch xlogy xy d
torch zeros_like x n | F adaptive_avg_pool1d x,1 d | F adaptive_avg_pool2d img,2 d | F avg_pool1d x,1 d
F avg_pool2d img,2 d | F batch_norm batch_norm d | F bilinear bilinear d | F binary_cross_entropy xy d
F binary_cross_entropy_with_logits xy d | F celu x d | F celu_ x d | F conv1d conv1 d | F conv2d conv2 d
F cosine_similarity xy d | F cross_entropy xy d | F dropout x dr | F dropout1d seq dr | F dropout2d img dr
F elu x d | F elu_ x d | F embedding embedding d | F fold x,2,1 d | F gelu x d | F glu x d
F group_norm x,1 d | F hardsigmoid x d | F hardswish x d | F hardtanh x d | F hardtanh_ x d
F huber_loss xy d | F instance_norm 3d d | F interpolate img,2 d | F kl_div xy d | F l1_loss xy d
F layer_norm x,(3,4) d | F leaky_relu x d | F leaky_relu_ x d | F linear xy d | F log_softmax unflatten d
F logsigmoid x d | F max_pool1d x,1 d | F max_pool2d img,2 d | F mish x d | F mse_loss xy d
F nll_loss x,tgt d | F normalize x d | F pad permute d | F pairwise_distance xy d | F relu x d | F relu6 x d
F relu_ x d | F rms_norm x,(3,4) d | F scaled_dot_product_attention xyz d | F selu x d | F selu_ x d
F sigmoid x d | F silu x d | F smooth_l1_loss xy d | F softmax unflatten d | F softmin unflatten d
F softplus x d | F softsign x d | F tanh x d | F threshold x,0,1 d | F threshold_ x,0,1 d | F unfold img,2 d
F upsample img,2 d | F upsample_bilinear img,2 d | F upsample_nearest img,2 d | linalg matmul bmm d
linalg matrix_norm x d | linalg norm x d | linalg vector_norm x d | special entr x d | special erf x d
special erfc x d | special erfinv x d | special exp2 x d | special expit x d | special expm1 x d
special i0 x d | special log1p x d | special log_softmax x,1 d | special logit x d
special logsumexp permute d | special ndtr x d | special round x d | special sinc x d | special softmax x,1 d
special xlog1py xy d | special xlogy xy d | M H addbmm d | M T bmm d | M __abs__ x d
M __getitem__ permute d | M __matmul__ bmm d | M __neg__ x d | M __pos__ x d | M __rmatmul__ bmm d
M abs x d | M abs_ x d | M absolute x d | M absolute_ x d | M acos x d | M acos_ x d | M acosh x d
M acosh_ x dx | M add xy d | M add_ xy d | M addbmm addbmm d | M addbmm_ addbmm d
M addcdiv masked_scatter d | M addcdiv_ masked_scatter d | M addcmul masked_scatter d
M addcmul_ masked_scatter d | M addmm b3,x,y43 d | M addmm_ b3,x,y43 d | M addmv addmv d | M addmv_ addmv d
M addr addr d | M addr_ addr d | M amax permute d | M amin permute d | M aminmax x d
M as_strided as_strided d | M as_strided_ as_strided d | M asin x d | M asin_ x d | M asinh x d
M asinh_ x dx | M atan x d | M atan2 xy d | M atan2_ xy d | M atan_ x d | M atanh x d | M atanh_ x dx
M baddbmm addbmm d | M baddbmm_ baddbmm d | M bernoulli x dr | M bernoulli_ x dr | M bfloat16 x d
M bmm bmm d | M broadcast_to x,(3,4) d | M ceil x d | M ceil_ x d | M chunk x,1 d | M clamp masked_scatter d
M clamp_ masked_scatter d | M clamp_max xy d | M clamp_max_ xy d | M clamp_min xy d | M clamp_min_ xy d
M clip masked_scatter d | M clip_ masked_scatter d | M clone x d | M conj x d | M contiguous x d
M copy_ xy d | M copysign xy d | M copysign_ xy d | M cos x d | M cos_ x d | M cosh x d | M cosh_ x d
M cpu x d | M cummax x,1 d | M cummin x,1 d | M cumprod x,1 d | M cumprod_ x,1 d | M cumsum x,1 d
M cumsum_ x,1 d | M data bmm n | M deg2rad x d | M deg2rad_ x d | M detach x n | M detach_ x n | M diag x d
M diag_embed x d | M diagonal x d | M diff x d | M dist xy d | M div xy d | M div_ xy d | M dot vv d
M double x d | M eq_ xy d | M erf x d | M erf_ x d | M erfc x d | M erfc_ x d | M erfinv x d | M erfinv_ x d
M exp x d | M exp2 x d | M exp2_ x d | M exp_ x d | M expand x,(3,4) d | M expand_as xy d | M expm1 x d
M expm1_ x d | M exponential_ x dr | M fill_ x,1 d | M fix x d | M fix_ x d | M flatten x d
M flip permute d | M fliplr x d | M flipud x d | M float x d | M float_power xy d | M float_power_ xy d
M floor x d | M floor_ x d | M floor_divide xy dx | M floor_divide_ xy dx | M fmax xy d | M fmin xy d
M fmod xy d | M fmod_ xy d | M frac x d | M frac_ x d | M frexp x d | M gather x,1,idx2 d | M ge_ xy d
M ger vv d | M gt_ xy d | M half x d | M heaviside xy dx | M heaviside_ xy dx | M histc x n | M hypot xy d
M hypot_ xy d | M i0 x d | M i0_ x d | M index_add x,0,idx,y d | M index_add_ x,0,idx,y d
M index_copy x,0,idx,y d | M index_copy_ x,0,idx,y d | M index_fill index_fill d | M index_fill_ index_fill d
M index_put index_put d | M index_put_ index_put d | M index_select x,0,idx d | M inner xy d | M kron bmm d
M kthvalue x,1 d | M ldexp xy d | M ldexp_ xy d | M le_ xy d | M lerp xyz d | M lerp_ xyz d | M log x d
M log10 x d | M log10_ x d | M log1p x d | M log1p_ x d | M log2 x d | M log2_ x d | M log_ x d
M log_softmax x,1 d | M logaddexp xy d | M logcumsumexp x,1 d | M logical_and_ xy d | M logical_not_ x d
M logical_or_ xy d | M logical_xor_ xy d | M logit x d | M logit_ x d | M logsumexp permute d | M lt_ xy d
M mH bmm d | M mT bmm d | M masked_fill masked_fill d | M masked_fill_ masked_fill d
M masked_scatter masked_scatter d | M masked_scatter_ masked_scatter d | M masked_select x,mask d
M matmul bmm d | M max x d | M maximum xy d | M mean permute d | M median x d | M min x d | M minimum xy d
M mm mm d | M mode x d | M moveaxis x,0,1 d | M movedim x,0,1 d | M msort x d | M mul xy d | M mul_ xy d
M mv x,x4 d | M nan_to_num x d | M nan_to_num_ x d | M nanmean permute d | M nanmedian x d
M nansum permute d | M narrow x,0,0,2 d | M ne_ xy d | M neg x d | M neg_ x d | M negative x d
M negative_ x d | M new_empty permute n | M new_full new_full n | M new_ones permute n | M new_tensor bmm n
M new_zeros permute n | M norm x d | M normal_ x dr | M outer vv d | M permute permute d | M positive x d
M pow xy d | M pow_ xy d | M prod x d | M rad2deg x d | M rad2deg_ x d | M random_ x dr | M ravel x d
M reciprocal x d | M reciprocal_ x d | M relu x d | M relu_ x d | M remainder xy d | M remainder_ xy d
M repeat permute d | M repeat_interleave x,1 d | M reshape x,-1 d | M reshape_as bmm d | M resolve_conj x d
M resolve_neg x d | M roll x,1 d | M rot90 x d | M round x d | M round_ x d | M rsqrt x d | M rsqrt_ x d
M scatter scatter d | M scatter_ scatter d | M scatter_add scatter d | M scatter_add_ scatter d
M scatter_reduce scatter_reduce d | M scatter_reduce_ scatter_reduce d | M select x,0,1 d | M sgn x dx
M sgn_ x dx | M sigmoid x d | M sigmoid_ x d | M sign x d | M sign_ x d | M sin x d | M sin_ x d | M sinc x d
M sinc_ x d | M sinh x d | M sinh_ x d | M softmax x,1 d | M sort x d | M split x,1 d | M sqrt x d
M sqrt_ x d | M square x d | M square_ x d | M squeeze permute d | M squeeze_ permute d | M std permute d
M sub xy d | M sub_ xy d | M sum permute d | M sum_to_size x,1 d | M swapaxes x,0,1 d | M swapaxes_ x,0,1 d
M swapdims x,0,1 d | M swapdims_ x,0,1 d | M t x d | M t_ x d | M take x,idx d | M take_along_dim x,idx d
M tan x d | M tan_ x d | M tanh x d | M tanh_ x d | M tensor_split permute d | M tile permute d | M to bmm d
M topk x,1 d | M trace x d | M transpose x,0,1 d | M transpose_ x,0,1 d | M tril x d | M tril_ x d
M triu x d | M triu_ x d | M true_divide xy d | M true_divide_ xy d | M trunc x d | M trunc_ x d
M unbind x d | M unflatten unflatten d | M uniform_ x dr | M unique x dx | M unique_consecutive x dx
M unsqueeze x,1 d | M unsqueeze_ x,1 d | M var permute d | M vdot vv d | M view x,-1 d | M view_as bmm d
M where masked_fill d | M xlogy xy d | M xlogy_ xy d | M zero_ x d
"""

ROWS = [tuple(row.split()) for line in TABLE.strip().splitlines() for row in line.split("|")]


# ---------------------------------------------------------------------------
# hand-written cases: name -> (expect, fn(L, T))
CASES = {}


def case(name, expect, fn):
    assert name not in CASES, name
    CASES[name] = (expect, fn)


def _setitem(x, key, value):
    x[key] = value
    return x


def _iadd(x, v):
    x += v
    return x


def _imul(x, v):
    x *= v
    return x


def _inplace_view(L, T, view, op):
    """A clone of x34 (a non-leaf), `op` applied in place to `view` of it: base and view both returned."""
    c = T["x34"].clone()
    v = view(c)
    op(v, T)
    return c, v


# indexing forms
case("x[1]", "d", lambda L, T: T["x34"][1])
case("x[-1]", "d", lambda L, T: T["x34"][-1])
case("x[1, 2]", "d", lambda L, T: T["x34"][1, 2])
case("x[1:3]", "d", lambda L, T: T["x34"][1:3])
case("x[::2]", "d", lambda L, T: T["x34"][::2])
case("x[:, 1]", "d", lambda L, T: T["x34"][:, 1])
case("x[:, 1:3]", "d", lambda L, T: T["x34"][:, 1:3])
case("x[mask]", "d", lambda L, T: T["x34"][T["mask"]])
case("x[idx]", "d", lambda L, T: T["x34"][T["idx"]])
case("x[:, idx]", "d", lambda L, T: T["x34"][:, T["idx"]])
case("x[idx, idx]", "d", lambda L, T: T["x34"][T["idx"], T["idx"]])
case("x[idx, 1:]", "d", lambda L, T: T["x34"][T["idx"], 1:])
case("x[..., None]", "d", lambda L, T: T["x34"][..., None])
case("x[None]", "d", lambda L, T: T["x34"][None])
case("x[[0, 2]]", "d", lambda L, T: T["x34"][[0, 2]])
case("x[[0, 2], [1, 3]]", "d", lambda L, T: T["x34"][[0, 2], [1, 3]])
case("x[[True, False, True]]", "d", lambda L, T: T["x34"][[True, False, True]])
case("x[idx2 % 3]", "d", lambda L, T: T["x34"][T["idx2"] % 3])
case("x[tensor(1)]", "d", lambda L, T: T["x34"][L.tensor(1)])
case("x[..., 1]", "d", lambda L, T: T["x234"][..., 1])
case("x[1, ..., None, 2]", "d", lambda L, T: T["x234"][1, ..., None, 2])
case("x[mask.any(1)]", "d", lambda L, T: T["x34"][T["mask"].any(1)])
case("s[()]", "d", lambda L, T: T["s"][()])
case("s[None]", "d", lambda L, T: T["s"][None])
# __getitem__ on non-leaf views
case("(2x)[1:][0]", "d", lambda L, T: (T["x34"] * 2)[1:][0])
case("x.t()[1]", "d", lambda L, T: T["x34"].t()[1])
case("x.view(12)[3:7]", "d", lambda L, T: T["x34"].view(12)[3:7])
case("x.T[mask.T]", "d", lambda L, T: T["x34"].T[T["mask"].T])
case("x[1:].unsqueeze(0)[0, 1]", "d", lambda L, T: T["x34"][1:].unsqueeze(0)[0, 1])
case("x.expand(2,3,4)[1][idx]", "d", lambda L, T: T["x34"].expand(2, 3, 4)[1][T["idx"]])
case("x.diagonal()[1:]", "d", lambda L, T: T["x44"].diagonal()[1:])
case("x.unbind(0)[1][::2]", "d", lambda L, T: T["x34"].unbind(0)[1][::2])
# in-place ops on views of leaves' clones
case("c[0] = y[0]", "d", lambda L, T: _setitem(T["x34"].clone(), 0, T["y34"][0]))
case("c[mask] = 0.5", "d", lambda L, T: _setitem(T["x34"].clone(), T["mask"], 0.5))
case("c[mask] = y[mask]", "d", lambda L, T: _setitem(T["x34"].clone(), T["mask"], T["y34"][T["mask"]]))
case("c[idx] = y[:2]", "d", lambda L, T: _setitem(T["x34"].clone(), T["idx"], T["y34"][:2]))
case("c[:, 1:3] = y[:, :2]", "d", lambda L, T: _setitem(T["x34"].clone(), (slice(None), slice(1, 3)), T["y34"][:, :2]))
case("c[..., None][1] = s", "d", lambda L, T: _setitem(T["x34"].clone()[..., None], 1, T["s"]))
case("c[:, 1].mul_(y[:, 1])", "d", lambda L, T: _inplace_view(L, T, lambda c: c[:, 1], lambda v, T: v.mul_(T["y34"][:, 1])))
case("c.t()[0].add_(1)", "d", lambda L, T: _inplace_view(L, T, lambda c: c.t()[0], lambda v, T: v.add_(1)))
case("c[1:].copy_(y[1:])", "d", lambda L, T: _inplace_view(L, T, lambda c: c[1:], lambda v, T: v.copy_(T["y34"][1:])))
case("c.view(12)[::3].sigmoid_()", "d", lambda L, T: _inplace_view(L, T, lambda c: c.view(12)[::3],
                                                                  lambda v, T: v.sigmoid_()))
case("c.narrow(1,1,2).exp_()", "d", lambda L, T: _inplace_view(L, T, lambda c: c.narrow(1, 1, 2), lambda v, T: v.exp_()))
case("c[1] += y[1]", "d", lambda L, T: _inplace_view(L, T, lambda c: c[1], lambda v, T: _iadd(v, T["y34"][1])))
case("c[:, ::2] *= y[:, ::2]", "d", lambda L, T: _inplace_view(L, T, lambda c: c[:, ::2],
                                                              lambda v, T: _imul(v, T["y34"][:, ::2])))
case("c.diagonal().mul_(y4)", "d", lambda L, T: (lambda c: (c.diagonal().mul_(T["y4"]), c)[1])(T["x44"].clone()))
case("c.masked_fill_(mask, 0.1)", "d", lambda L, T: T["x34"].clone().masked_fill_(T["mask"], 0.1))
case("c.index_add_(0, idx, y[:2])", "d", lambda L, T: T["x34"].clone().index_add_(0, T["idx"], T["y34"][:2]))
case("c.index_copy_(0, idx, y[:2])", "d", lambda L, T: T["x34"].clone().index_copy_(0, T["idx"], T["y34"][:2]))
case("c.scatter_(1, idx2, y)", "d", lambda L, T: T["x34"].clone().scatter_(1, T["idx2"], T["y34"]))
case("c.clamp_(.3, .6)", "d", lambda L, T: T["x34"].clone().clamp_(0.3, 0.6))
case("c.zero_()", "d", lambda L, T: T["x34"].clone().zero_())
case("c.fill_(s)", "d", lambda L, T: T["x34"].clone().fill_(T["s"]))
# in-place view ops on views of a clone: a node of their own (not CopySlices on the base), then a write
case("c[None].squeeze_()", "d", lambda L, T: _inplace_view(L, T, lambda c: c[None], lambda v, T: v.squeeze_()))
case("c[1:].unsqueeze_(0)", "d", lambda L, T: _inplace_view(L, T, lambda c: c[1:], lambda v, T: v.unsqueeze_(0)))
case("c[1:].t_()", "d", lambda L, T: _inplace_view(L, T, lambda c: c[1:], lambda v, T: v.t_()))
case("c[:, ::2].transpose_(0, 1)", "d", lambda L, T: _inplace_view(L, T, lambda c: c[:, ::2],
                                                                  lambda v, T: v.transpose_(0, 1)))
case("c[None].swapdims_(0, 2)", "d", lambda L, T: _inplace_view(L, T, lambda c: c[None], lambda v, T: v.swapdims_(0, 2)))
case("c[1:].as_strided_((2, 2), (1, 2))", "d", lambda L, T: _inplace_view(L, T, lambda c: c[1:],
                                                                         lambda v, T: v.as_strided_((2, 2), (1, 2))))
case("c[None].squeeze_(0).mul_(y)", "d", lambda L, T: _inplace_view(L, T, lambda c: c[None],
                                                                   lambda v, T: v.squeeze_(0).mul_(T["y34"])))
case("c.eq_(y)", "d", lambda L, T: T["x34"].clone().eq_(T["y34"]))
case("c.lt_(y)", "d", lambda L, T: T["x34"].clone().lt_(T["y34"]))
case("c.ge_(.5)", "d", lambda L, T: T["x34"].clone().ge_(0.5))
case("c[:, 0].ne_(y[:, 0])", "d", lambda L, T: _inplace_view(L, T, lambda c: c[:, 0], lambda v, T: v.ne_(T["y34"][:, 0])))
case("c.logit_()", "d", lambda L, T: T["x34"].clone().logit_())
case("c.xlogy_(y)", "d", lambda L, T: T["x34"].clone().xlogy_(T["y34"]))
case("c.i0_()", "d", lambda L, T: T["x34"].clone().i0_())
case("c.ldexp_(y)", "d", lambda L, T: T["x34"].clone().ldexp_(T["y34"]))
case("c.sinc_()", "d", lambda L, T: T["x34"].clone().sinc_())
# Tensor.__iter__
case("list(x)", "d", lambda L, T: list(T["x34"]))
case("sum(x)", "d", lambda L, T: sum(T["x34"]))
case("sum(x4)", "d", lambda L, T: sum(T["x4"]))
case("[r * 2 for r in x234]", "d", lambda L, T: [r * 2 for r in T["x234"]])
case("stack(list(x))", "d", lambda L, T: L.stack(list(T["x34"])))
case("max(x4)", "d", lambda L, T: max(T["x4"]))
case("a, b, c = x", "d", lambda L, T: (lambda a, b, c: a * b + c)(*T["x34"]))
# unbind / split / chunk / tensor_split
case("x.unbind(1)", "d", lambda L, T: T["x34"].unbind(1))
case("unbind(x)", "d", lambda L, T: L.unbind(T["x34"]))
case("x.split(2, 1)", "d", lambda L, T: T["x34"].split(2, 1))
case("x.split([1, 3], 1)", "d", lambda L, T: T["x34"].split([1, 3], 1))
case("split(x, 1)", "d", lambda L, T: L.split(T["x34"], 1))
case("x.chunk(2, 1)", "d", lambda L, T: T["x34"].chunk(2, 1))
case("chunk(x, 3)", "d", lambda L, T: L.chunk(T["x34"], 3))
case("x.tensor_split(3, 1)", "d", lambda L, T: T["x34"].tensor_split(3, 1))
case("x.tensor_split([1, 2], 1)", "d", lambda L, T: T["x34"].tensor_split([1, 2], 1))
case("tensor_split(x, tensor([1]))", "d", lambda L, T: L.tensor_split(T["x34"], L.tensor([1])))
case("x.split(1)[1] * y", "d", lambda L, T: T["x34"].split(1)[1] * T["y34"])
# .T / .mT / .H / .mH / .real and friends
case("x.T", "d", lambda L, T: T["x34"].T)
case("x.mT", "d", lambda L, T: T["x34"].mT)
case("x.H", "d", lambda L, T: T["x34"].H)
case("x.mH", "d", lambda L, T: T["x234"].mH)
case("x4.T", "d", lambda L, T: T["x4"].T)
case("x.real", "d", lambda L, T: T["x34"].real)
case("x.adjoint()", "d", lambda L, T: T["x34"].adjoint())
case("x.conj()", "d", lambda L, T: T["x34"].conj())
case("x.resolve_conj()", "d", lambda L, T: T["x34"].resolve_conj())
case("x.resolve_neg()", "d", lambda L, T: T["x34"].resolve_neg())
case("x @ y43.T.T", "d", lambda L, T: T["x34"] @ T["y43"].T.T)
case("x.data", "n", lambda L, T: T["x34"].data)
# operator dunders
case("x + y", "d", lambda L, T: T["x34"] + T["y34"])
case("2 + x", "d", lambda L, T: 2 + T["x34"])
case("x - 2", "d", lambda L, T: T["x34"] - 2)
case("2 - x", "d", lambda L, T: 2 - T["x34"])
case("2 * x", "d", lambda L, T: 2 * T["x34"])
case("x * y", "d", lambda L, T: T["x34"] * T["y34"])
case("x ** 2", "d", lambda L, T: T["x34"] ** 2)
case("x ** y", "d", lambda L, T: T["x34"] ** T["y34"])
case("x ** s", "d", lambda L, T: T["x34"] ** T["s"])
case("2 ** x", "d", lambda L, T: 2 ** T["x34"])
case("2.5 ** x", "d", lambda L, T: 2.5 ** T["x34"])
case("x @ y43", "d", lambda L, T: T["x34"] @ T["y43"])
case("y43.__rmatmul__(x)", "d", lambda L, T: T["y43"].__rmatmul__(T["x34"]))
case("x4 @ x4", "d", lambda L, T: T["x4"] @ T["y4"])
case("x234 @ y43", "d", lambda L, T: T["x234"] @ T["y43"])
case("-x", "d", lambda L, T: -T["x34"])
case("+x", "d", lambda L, T: +T["x34"])
case("abs(x - .5)", "d", lambda L, T: abs(T["x34"] - 0.5))
case("x / y", "d", lambda L, T: T["x34"] / T["y34"])
case("x / 2", "d", lambda L, T: T["x34"] / 2)
case("2 / x", "d", lambda L, T: 2 / T["x34"])
case("x % 0.3", "d", lambda L, T: T["x34"] % 0.3)
case("x // y", "dx", lambda L, T: T["x34"] // T["y34"])
case("c += y", "d", lambda L, T: _iadd(T["x34"].clone(), T["y34"]))
case("c *= 2", "d", lambda L, T: _imul(T["x34"].clone(), 2))
case("x > .5", "n", lambda L, T: T["x34"] > 0.5)
case("x.__getitem__(idx)", "d", lambda L, T: T["x34"].__getitem__(T["idx"]))
# dtype and device conversions
case("x.type_as(y.float())", "d", lambda L, T: T["x34"].type_as(T["y34"].float()))
case("x.to(float32)", "d", lambda L, T: T["x34"].to(L.float32))
case("x.to(dtype=float32, copy=True)", "d", lambda L, T: T["x34"].to(dtype=L.float32, copy=True))
case("x.to('cpu')", "d", lambda L, T: T["x34"].to("cpu"))
case("x.to(y)", "d", lambda L, T: T["x34"].to(T["y34"]))
case("x.to('cpu', float32)", "d", lambda L, T: T["x34"].to("cpu", L.float32))
case("x.double()", "d", lambda L, T: T["x34"].double())
case("x.float()", "d", lambda L, T: T["x34"].float())
case("x.half()", "d", lambda L, T: T["x34"].half())
case("x.bfloat16()", "d", lambda L, T: T["x34"].bfloat16())
case("x.cpu()", "d", lambda L, T: T["x34"].cpu())
case("x.type(float32)", "d", lambda L, T: T["x34"].type(L.float32))
case("x.long()", "n", lambda L, T: T["x34"].long())
case("x.float().double()", "d", lambda L, T: T["x34"].float().double())
# shape helpers
case("x4.expand_as(x)", "d", lambda L, T: T["x4"].expand_as(T["x34"]))
case("x.view_as(y)", "d", lambda L, T: T["x34"].view_as(T["y34"]))
case("x.reshape_as(y43)", "d", lambda L, T: T["x34"].reshape_as(T["y43"]))
case("x.new_tensor([1., 2.])", "n", lambda L, T: T["x34"].new_tensor([1.0, 2.0]))
case("x.new_zeros(2)", "n", lambda L, T: T["x34"].new_zeros(2))
case("x.clone()", "d", lambda L, T: T["x34"].clone())
case("x.t().contiguous()", "d", lambda L, T: T["x34"].t().contiguous())
case("x.contiguous()", "d", lambda L, T: T["x34"].contiguous())
case("x.flatten()", "d", lambda L, T: T["x34"].flatten())
case("x234.flatten(0, 1)", "d", lambda L, T: T["x234"].flatten(0, 1))
case("x[:, None].squeeze(1)", "d", lambda L, T: T["x34"][:, None].squeeze(1))
case("x[:, None].squeeze()", "d", lambda L, T: T["x34"][:, None].squeeze())
case("x.squeeze(0)", "d", lambda L, T: T["x34"].squeeze(0))
case("x.unflatten(1, (2, 2))", "d", lambda L, T: T["x34"].unflatten(1, (2, 2)))
case("x.view(-1)", "d", lambda L, T: T["x34"].view(-1))
case("x.reshape(2, 6)", "d", lambda L, T: T["x34"].reshape(2, 6))
case("x.t().reshape(-1)", "d", lambda L, T: T["x34"].t().reshape(-1))
case("x.movedim(0, 1)", "d", lambda L, T: T["x34"].movedim(0, 1))
case("x.repeat(2, 1)", "d", lambda L, T: T["x34"].repeat(2, 1))
case("x.expand(2, 3, 4)", "d", lambda L, T: T["x34"].expand(2, 3, 4))
case("x.as_strided((2, 2), (1, 2))", "d", lambda L, T: T["x34"].as_strided((2, 2), (1, 2)))
# ember.<fn> of several tensors
case("stack([x, y])", "d", lambda L, T: L.stack([T["x34"], T["y34"]]))
case("stack((x, y), 2)", "d", lambda L, T: L.stack((T["x34"], T["y34"]), 2))
case("cat([x, y], 1)", "d", lambda L, T: L.cat([T["x34"], T["y34"]], 1))
case("cat([x, empty])", "d", lambda L, T: L.cat([T["x34"], L.zeros(0, 4, dtype=L.float64)]))
case("hstack", "d", lambda L, T: L.hstack([T["x34"], T["y34"]]))
case("vstack", "d", lambda L, T: L.vstack([T["x34"], T["x4"]]))
case("dstack", "d", lambda L, T: L.dstack([T["x34"], T["y34"]]))
case("column_stack", "d", lambda L, T: L.column_stack([T["x3"], T["y34"]]))
case("where(mask, x, y)", "d", lambda L, T: L.where(T["mask"], T["x34"], T["y34"]))
case("where(mask, x, 0.)", "d", lambda L, T: L.where(T["mask"], T["x34"], 0.0))
case("where(mask, 1., y)", "d", lambda L, T: L.where(T["mask"], 1.0, T["y34"]))
case("x.where(mask, s)", "d", lambda L, T: T["x34"].where(T["mask"], T["s"]))
case("einsum(ij,kj->ik)", "d", lambda L, T: L.einsum("ij,kj->ik", T["x34"], T["y34"]))
case("einsum(bij,bjk)", "d", lambda L, T: L.einsum("bij,bjk->bik", T["x234"], T["y243"]))
case("einsum(ii)", "d", lambda L, T: L.einsum("ii", T["x44"]))
case("einsum(i,j->ij) list", "d", lambda L, T: L.einsum("i,j->ij", [T["x3"], T["x4"]]))
case("cdist(x, y)", "d", lambda L, T: L.cdist(T["x34"], T["y34"]))
case("cdist(x, y, p=1)", "d", lambda L, T: L.cdist(T["x34"], T["y34"], p=1))
case("tensordot", "d", lambda L, T: L.tensordot(T["x34"], T["y43"], dims=1))
case("kron", "d", lambda L, T: L.kron(T["x3"], T["x4"]))
case("block_diag", "d", lambda L, T: L.block_diag(T["x34"], T["b33"]))
case("broadcast_tensors", "d", lambda L, T: L.broadcast_tensors(T["x34"], T["x4"]))
case("meshgrid", "d", lambda L, T: L.meshgrid(T["x3"], T["x4"], indexing="ij"))
case("cartesian_prod", "d", lambda L, T: L.cartesian_prod(T["x3"], T["x4"]))
case("lerp(x, y, w)", "d", lambda L, T: L.lerp(T["x34"], T["y34"], T["z34"]))
case("clamp(x, min=y)", "d", lambda L, T: L.clamp(T["x34"], min=T["y34"]))
case("max(x, 1)", "d", lambda L, T: L.max(T["x34"], 1))
case("x.max(1).values", "d", lambda L, T: T["x34"].max(1).values)
case("x.sort(1)[0]", "d", lambda L, T: T["x34"].sort(1)[0])
case("x.topk(2).values", "d", lambda L, T: T["x34"].topk(2).values)
case("cumsum", "d", lambda L, T: L.cumsum(T["x34"], 1))
case("frexp(s)", "d", lambda L, T: L.frexp(T["s"] * 3))
case("s.mT", "d", lambda L, T: T["s"].mT * 2)
case("frexp(x).mantissa", "d", lambda L, T: L.frexp(T["x34"] * 4).mantissa)
case("bincount(weights=x4)", "dx", lambda L, T: L.bincount(L.tensor([0, 2, 2, 1]), weights=T["x4"]))
case("unique(x)", "dx", lambda L, T: L.unique(T["x34"]))
case("as_tensor(x)", "d", lambda L, T: L.as_tensor(T["x34"]))
case("asarray(x)", "d", lambda L, T: L.asarray(T["x34"]))
case("as_tensor(x, dtype=float32)", "d", lambda L, T: L.as_tensor(T["x34"], dtype=L.float32))
case("zeros(3, requires_grad=True)", "d", lambda L, T: L.zeros(3, dtype=L.float64, requires_grad=True) + T["x3"])
case("x.sum(dim=(0, 1))", "d", lambda L, T: T["x34"].sum(dim=(0, 1)))
case("x.norm()", "d", lambda L, T: T["x34"].norm())
case("x.std(1)", "d", lambda L, T: T["x34"].std(1))
case("x.var_mean(1)", "d", lambda L, T: L.var_mean(T["x34"], 1))
case("x.softmax(-1)", "d", lambda L, T: T["x34"].softmax(-1))
case("x.masked_select(mask)", "d", lambda L, T: T["x34"].masked_select(T["mask"]))
case("x.take(idx)", "d", lambda L, T: T["x34"].take(T["idx"]))
case("x.gather(1, idx2)", "d", lambda L, T: T["x34"].gather(1, T["idx2"]))
case("x.index_select(1, idx)", "d", lambda L, T: T["x34"].index_select(1, T["idx"]))
case("x.diag_embed()", "d", lambda L, T: T["x34"].diag_embed())
case("x.nan_to_num()", "d", lambda L, T: T["x34"].nan_to_num())
# nn.functional calls of common models (GPT, CNN, classifier)
_F = lambda L: L.nn.functional  # noqa: E731
case("F.linear(x, w, b)", "d", lambda L, T: _F(L).linear(T["x34"], T["w43"], T["b3"]))
case("F.linear(x, w)", "d", lambda L, T: _F(L).linear(T["x34"], T["w43"]))
case("F.embedding(idx2, w)", "d", lambda L, T: _F(L).embedding(T["idx2"], T["x44"]))
case("F.embedding(padding_idx)", "d", lambda L, T: _F(L).embedding(T["idx2"], T["x44"], padding_idx=1))
case("F.layer_norm(x, (4,), w, b)", "d", lambda L, T: _F(L).layer_norm(T["x34"], (4,), T["x4"], T["y4"]))
case("F.layer_norm(x, (4,))", "d", lambda L, T: _F(L).layer_norm(T["x34"], (4,)))
case("F.rms_norm(x, (4,), w)", "d", lambda L, T: _F(L).rms_norm(T["x34"], (4,), T["x4"]))
case("F.group_norm(img, 2, w, b)", "d", lambda L, T: _F(L).group_norm(T["img"], 2, T["b2"], T["b2"] * 2))
case("F.batch_norm(train, w, b)", "d", lambda L, T: _F(L).batch_norm(T["x34"], T["rm"], T["rv"], T["x4"], T["y4"],
                                                                    training=True))
case("F.batch_norm(eval)", "d", lambda L, T: _F(L).batch_norm(T["x34"], T["rm"], T["rv"], T["x4"], T["y4"]))
case("F.dropout(p=0)", "d", lambda L, T: _F(L).dropout(T["x34"], 0.0))
case("F.dropout(eval)", "d", lambda L, T: _F(L).dropout(T["x34"], 0.5, training=False))
case("F.dropout(train)", "dr", lambda L, T: _F(L).dropout(T["x34"], 0.5))
case("F.softmax(x, -1)", "d", lambda L, T: _F(L).softmax(T["x34"], -1))
case("F.log_softmax(x, 1)", "d", lambda L, T: _F(L).log_softmax(T["x34"], 1))
case("F.softmax(dtype=float32)", "d", lambda L, T: _F(L).softmax(T["x34"], -1, dtype=L.float32))
case("F.cross_entropy(x, tgt)", "d", lambda L, T: _F(L).cross_entropy(T["x34"], T["tgt"]))
case("F.cross_entropy(smoothing)", "d", lambda L, T: _F(L).cross_entropy(T["x34"], T["tgt"], label_smoothing=0.1))
case("F.cross_entropy(ignore_index)", "d", lambda L, T: _F(L).cross_entropy(T["x34"], T["tgt"], ignore_index=3))
case("F.cross_entropy(probs)", "d", lambda L, T: _F(L).cross_entropy(T["x34"], T["y34"].softmax(1)))
case("F.cross_entropy(weight)", "d", lambda L, T: _F(L).cross_entropy(T["x34"], T["tgt"], weight=T["c4"]))
case("F.nll_loss", "d", lambda L, T: _F(L).nll_loss(T["x34"].log_softmax(1), T["tgt"]))
case("F.mse_loss", "d", lambda L, T: _F(L).mse_loss(T["x34"], T["y34"]))
case("F.l1_loss", "d", lambda L, T: _F(L).l1_loss(T["x34"], T["y34"]))
case("F.binary_cross_entropy", "d", lambda L, T: _F(L).binary_cross_entropy(T["x34"], T["y34"]))
case("F.bce_with_logits(pos_weight)", "d", lambda L, T: _F(L).binary_cross_entropy_with_logits(
    T["x34"], T["y34"], pos_weight=T["c4"]))
case("F.kl_div", "d", lambda L, T: _F(L).kl_div(T["x34"].log(), T["y34"], reduction="batchmean"))
case("F.gelu", "d", lambda L, T: _F(L).gelu(T["x34"]))
case("F.gelu(tanh)", "d", lambda L, T: _F(L).gelu(T["x34"], approximate="tanh"))
case("F.silu", "d", lambda L, T: _F(L).silu(T["x34"]))
case("F.relu(inplace)", "d", lambda L, T: _F(L).relu(T["x34"] - 0.5, inplace=True))
case("F.glu", "d", lambda L, T: _F(L).glu(T["x34"]))
case("F.sdpa", "d", lambda L, T: _F(L).scaled_dot_product_attention(T["x234"], T["y34"].expand(2, 3, 4),
                                                                    T["z34"].expand(2, 3, 4)))
case("F.sdpa(causal)", "d", lambda L, T: _F(L).scaled_dot_product_attention(T["x234"], T["x234"] * 2, T["x234"] + 1,
                                                                           is_causal=True))
case("F.sdpa(mask)", "d", lambda L, T: _F(L).scaled_dot_product_attention(
    T["x234"], T["x234"], T["x234"], attn_mask=L.tensor([[True, False, True]] * 3)))
case("F.conv2d(bias, padding)", "d", lambda L, T: _F(L).conv2d(T["img"], T["w2"], T["b3"], padding=1))
case("F.conv1d(stride)", "d", lambda L, T: _F(L).conv1d(T["seq"], T["w1"], T["b3"], stride=2))
case("F.max_pool2d", "d", lambda L, T: _F(L).max_pool2d(T["img"], 2))
case("F.avg_pool2d", "d", lambda L, T: _F(L).avg_pool2d(T["img"], 2))
case("F.adaptive_avg_pool2d(1)", "d", lambda L, T: _F(L).adaptive_avg_pool2d(T["img"], 1))
case("F.interpolate(nearest)", "d", lambda L, T: _F(L).interpolate(T["img"], scale_factor=2))
case("F.interpolate(bilinear)", "d", lambda L, T: _F(L).interpolate(T["img"], size=(7, 7), mode="bilinear"))
case("F.pad(constant)", "d", lambda L, T: _F(L).pad(T["x34"], (1, 2)))
case("F.pad(reflect)", "d", lambda L, T: _F(L).pad(T["img"], (1, 1, 1, 1), mode="reflect"))
case("F.normalize", "d", lambda L, T: _F(L).normalize(T["x34"], dim=1))
case("F.cosine_similarity", "d", lambda L, T: _F(L).cosine_similarity(T["x34"], T["y34"]))
case("F.one_hot", "n", lambda L, T: _F(L).one_hot(T["tgt"], 4))
case("F.unfold", "d", lambda L, T: _F(L).unfold(T["img"], 2))
case("F.fold", "d", lambda L, T: _F(L).fold(T["x234"].reshape(1, 4, 6), (3, 4), (2, 2)))
case("F.softplus", "d", lambda L, T: _F(L).softplus(T["x34"], beta=2))
case("F.mish", "d", lambda L, T: _F(L).mish(T["x34"]))
case("F.hardtanh(x, .3, .6)", "d", lambda L, T: _F(L).hardtanh(T["x34"], 0.3, 0.6))


def _outputs(L, r):
    """The tensors of a result (nested tuples and lists flattened)."""
    if isinstance(r, L.Tensor):
        return [r]
    if isinstance(r, (tuple, list)):
        return [t for e in r for t in _outputs(L, e)]
    return []


def _weights(outs):
    rng = np.random.default_rng(1)
    return [rng.uniform(-1, 1, tuple(t.shape)) for t in outs]


def _loss(L, outs, ws):
    total = L.zeros((), dtype=L.float64)
    for t, w in zip(outs, ws):
        if t.dtype.is_floating_point:
            total = total + (t.double() * L.tensor(w, dtype=L.float64)).sum()
    return total


def _run(L, fn, arrays=None, grad=True):
    T = Inputs(L, arrays, grad)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = fn(L, T)
    return T, r


def _grads(L, fn):
    """(T, outputs, {leaf name: gradient array or None}) of sum(result * weights)."""
    T, r = _run(L, fn)
    outs = _outputs(L, r)
    diff = [t for t in outs if t.requires_grad]
    names = T.leaves()
    if not diff:
        return T, outs, None
    loss = _loss(L, diff, _weights(diff))
    g = L.autograd.grad(loss, [T[k] for k in names], allow_unused=True)
    return T, outs, {k: None if v is None else np.array(v.tolist()) for k, v in zip(names, g)}


# where torch's gradient is a convention, not the derivative, finite differences can't be the reference
FD_EXEMPT = {
    "torch scatter": "duplicate indices: torch gives every source element the gradient, overwritten or not",
    "M scatter": "as torch scatter", "M scatter_": "as torch scatter", "c.scatter_(1, idx2, y)": "as torch scatter",
    "F.embedding(padding_idx)": "the padding row gets no gradient by definition",
    "M logical_and_": "torch passes the gradient through the write (CloneBackward0); ember does as torch",
    "M logical_or_": "as logical_and_", "M logical_xor_": "as logical_and_", "M logical_not_": "as logical_and_",
}


# float64 results computed through float32: the finite-difference step and tolerance of float32
FD_FLOAT32 = {"x.float().double()"}


def _finite_differences(fn, names, label=""):
    """Central differences of sum(result * weights) (weights as _grads draws them) in every element of each
    leaf; the step and the tolerance (rtol, atol) grow with the rounding of the results' dtype."""
    def f(arrays):
        _, r = _run(ember, fn, arrays, grad=False)
        outs = [t for t in _outputs(ember, r) if t.dtype.is_floating_point]
        return float(_loss(ember, outs, ws))
    _, r0 = _run(ember, fn)
    diff = [t for t in _outputs(ember, r0) if t.requires_grad]
    ws = _weights(diff)
    dtypes = {str(t.dtype).split(".")[-1] for t in diff} | ({"float32"} if label in FD_FLOAT32 else set())
    eps, tol = ((0.1, (0.1, 0.05)) if dtypes & {"float16", "bfloat16"} else
                (1e-4, (1e-3, 1e-4)) if "float32" in dtypes else (1e-6, (1e-4, 1e-5)))
    out = {}
    for k in names:
        g = np.zeros_like(ARRAYS[k])
        for i in np.ndindex(*ARRAYS[k].shape):
            arrays = {n: v.copy() for n, v in ARRAYS.items()}
            arrays[k][i] += eps
            hi = f(arrays)
            arrays[k][i] -= 2 * eps
            g[i] = (hi - f(arrays)) / (2 * eps)
        out[k] = g
    return out, tol


def check(fn, expect, label):
    _, r = _run(ember, fn)
    outs = _outputs(ember, r)
    assert outs, f"{label}: no tensor result"
    diff = any(t.requires_grad for t in outs)
    assert diff == expect.startswith("d"), (
        f"{label}: result requires_grad={diff}, torch's {'does' if expect.startswith('d') else 'does not'}")
    if torch is not None:
        _, tr = _run(torch, fn)
        touts = _outputs(torch, tr)
        assert [t.requires_grad for t in outs] == [t.requires_grad for t in touts], label
        assert [tuple(t.shape) for t in outs] == [tuple(t.shape) for t in touts], label
    if expect == "dx":  # torch's backward raises: ember's must too where torch has no formula
        if label in RAISING_BACKWARD:
            with pytest.raises((RuntimeError, NotImplementedError), match="derivative for"):
                _grads(ember, fn)
        else:
            _grads(ember, fn)
    if expect != "d":  # random draws, or a backward torch can't run: no reference values
        return
    _, _, g = _grads(ember, fn)
    if torch is not None:
        _, _, ref = _grads(torch, fn)
        for k in g:  # torch leaves an unused input's gradient None where ember may give zeros, and the reverse
            if ref[k] is None and g[k] is not None:
                np.testing.assert_array_equal(g[k], 0, err_msg=f"{label}: {k}")
            elif g[k] is None:
                assert ref[k] is None or not ref[k].any(), f"{label}: no gradient for {k} (torch has one)"
            else:
                np.testing.assert_allclose(g[k], ref[k], rtol=1e-7, atol=1e-9, err_msg=f"{label}: d/d{k}")
    elif label not in FD_EXEMPT:
        ref, (rtol, atol) = _finite_differences(fn, list(g), label)
        for k in g:
            got = np.zeros_like(ref[k]) if g[k] is None else g[k]
            np.testing.assert_allclose(got, ref[k], rtol=rtol, atol=atol, err_msg=f"{label}: d/d{k} (finite diff)")


class _no_raise:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# 'dx' calls whose backward raises in ember as in torch (floor_divide, heaviside, unique: no formula)
RAISING_BACKWARD = {"torch floor_divide", "M floor_divide", "M floor_divide_", "torch heaviside", "M heaviside",
                    "M heaviside_", "torch unique",
                    "torch unique_consecutive", "M unique", "M unique_consecutive", "x // y", "unique(x)", "bincount(weights=x4)"}


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r[0]}.{r[1]}")
def test_table(row):
    ns, name, recipe, expect = row
    check(table_call(ns, name, recipe), expect, f"{ns} {name}")


@pytest.mark.parametrize("name", list(CASES))
def test_case(name):
    expect, fn = CASES[name]
    check(fn, expect, name)
