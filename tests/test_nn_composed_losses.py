"""The margin / ranking / embedding losses and the Poisson and Gaussian NLL
losses (nn.functional and their modules, nn/_losses.py): values and
gradients against torch (float64, every reduction), NumPy / hand-computed
references when torch is missing, module reprs and torch's errors."""
import math

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F

try:
    import torch as _torch
except ImportError:
    _torch = None
needs_torch = pytest.mark.skipif(_torch is None, reason="torch not installed")

REDUCTIONS = ["none", "mean", "sum"]


def rng(seed=0):
    return np.random.default_rng(seed)


def both(arrays, grads):
    """ember and torch tensors of the same arrays; the float ones in `grads` require grad."""
    e = [ember.tensor(a).requires_grad_(i in grads) if i in grads else ember.tensor(a) for i, a in enumerate(arrays)]
    t = [_torch.tensor(a).requires_grad_(i in grads) if i in grads else _torch.tensor(a)
         for i, a in enumerate(arrays)]
    return e, t


def check(ef, tf, arrays, grads=(0,), rtol=1e-10, atol=1e-12):
    """ef(*ember tensors) against tf(*torch tensors): value, then the gradients of sum(out * w)."""
    e, t = both(arrays, grads)
    eo, to = ef(*e), tf(*t)
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), rtol=rtol, atol=atol)
    assert tuple(eo.shape) == tuple(to.shape)
    if grads and to.requires_grad:
        w = rng(9).standard_normal(tuple(to.shape))
        (eo * ember.tensor(w)).sum().backward()
        (to * _torch.tensor(w)).sum().backward()
        for i in grads:
            np.testing.assert_allclose(e[i].grad.numpy(), t[i].grad.numpy(), rtol=1e-8, atol=1e-10)


def errors_match(ef, tf):
    with pytest.raises(Exception) as te:
        tf()
    with pytest.raises(type(te.value)):
        ef()


# ----------------------------------------------------------------- torch parity

@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_margin_ranking_hinge_cosine_embedding(reduction):
    r = rng(1)
    x1, x2 = r.standard_normal((6,)), r.standard_normal((6,))
    y = np.where(r.random(6) > 0.5, 1.0, -1.0)
    check(lambda a, b, c: F.margin_ranking_loss(a, b, c, margin=0.3, reduction=reduction),
          lambda a, b, c: _torch.nn.functional.margin_ranking_loss(a, b, c, margin=0.3, reduction=reduction),
          [x1, x2, y], grads=(0, 1))
    check(lambda a, c: F.hinge_embedding_loss(a, c, margin=0.5, reduction=reduction),
          lambda a, c: _torch.nn.functional.hinge_embedding_loss(a, c, margin=0.5, reduction=reduction),
          [x1, y])
    a, b = r.standard_normal((6, 4)), r.standard_normal((6, 4))
    check(lambda a, b, c: F.cosine_embedding_loss(a, b, c, margin=0.1, reduction=reduction),
          lambda a, b, c: _torch.nn.functional.cosine_embedding_loss(a, b, c, margin=0.1, reduction=reduction),
          [a, b, y], grads=(0, 1))
    check(lambda a, b, c: F.cosine_embedding_loss(a, b, c, reduction=reduction),
          lambda a, b, c: _torch.nn.functional.cosine_embedding_loss(a, b, c, reduction=reduction),
          [a[0], b[0], np.array(-1.0)], grads=(0, 1))


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("p", [1.0, 2.0, 3.0])
def test_triplet_margin_loss(reduction, swap, p):
    r = rng(2)
    a, pos, neg = (r.standard_normal((5, 4)) for _ in range(3))
    check(lambda *t: F.triplet_margin_loss(*t, margin=0.7, p=p, swap=swap, reduction=reduction),
          lambda *t: _torch.nn.functional.triplet_margin_loss(*t, margin=0.7, p=p, swap=swap, reduction=reduction),
          [a, pos, neg], grads=(0, 1, 2))


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_triplet_margin_with_distance_loss(reduction):
    r = rng(3)
    a, pos, neg = (r.standard_normal((5, 4)) for _ in range(3))
    check(lambda *t: F.triplet_margin_with_distance_loss(*t, reduction=reduction, swap=True),
          lambda *t: _torch.nn.functional.triplet_margin_with_distance_loss(*t, reduction=reduction, swap=True),
          [a, pos, neg], grads=(0, 1, 2))
    e_cos = lambda x, y: 1.0 - F.cosine_similarity(x, y)  # noqa: E731
    t_cos = lambda x, y: 1.0 - _torch.nn.functional.cosine_similarity(x, y)  # noqa: E731
    check(lambda *t: nn.TripletMarginWithDistanceLoss(distance_function=e_cos, margin=0.5, reduction=reduction)(*t),
          lambda *t: _torch.nn.TripletMarginWithDistanceLoss(distance_function=t_cos, margin=0.5,
                                                             reduction=reduction)(*t),
          [a, pos, neg], grads=(0, 1, 2))


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_multi_margin_loss(reduction, p, weighted):
    r = rng(4)
    x = r.standard_normal((6, 5))
    y = r.integers(0, 5, 6)
    w = r.random(5) + 0.5 if weighted else None
    ew = ember.tensor(w) if weighted else None
    tw = _torch.tensor(w) if weighted else None
    check(lambda a, b: F.multi_margin_loss(a, b, p=p, margin=0.8, weight=ew, reduction=reduction),
          lambda a, b: _torch.nn.functional.multi_margin_loss(a, b, p=p, margin=0.8, weight=tw, reduction=reduction),
          [x, y])
    check(lambda a, b: F.multi_margin_loss(a, b, reduction=reduction),
          lambda a, b: _torch.nn.functional.multi_margin_loss(a, b, reduction=reduction), [x[0], np.array(2)])


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multilabel_margin_and_soft_margin(reduction):
    r = rng(5)
    x = r.standard_normal((4, 5))
    y = np.array([[3, 0, -1, 1, 1], [0, 1, 2, 3, 4], [-1, 2, 2, 2, 2], [4, 4, -1, 0, 0]])
    check(lambda a, b: F.multilabel_margin_loss(a, b, reduction=reduction),
          lambda a, b: _torch.nn.functional.multilabel_margin_loss(a, b, reduction=reduction), [x, y])
    check(lambda a, b: F.multilabel_margin_loss(a, b, reduction=reduction),
          lambda a, b: _torch.nn.functional.multilabel_margin_loss(a, b, reduction=reduction), [x[0], y[0]])
    t = (r.random((4, 5)) > 0.5).astype(np.float64)
    w = r.random(5)
    check(lambda a, b: F.multilabel_soft_margin_loss(a, b, weight=ember.tensor(w), reduction=reduction),
          lambda a, b: _torch.nn.functional.multilabel_soft_margin_loss(a, b, weight=_torch.tensor(w),
                                                                         reduction=reduction), [x, t])
    s = np.where(t > 0, 1.0, -1.0)
    check(lambda a, b: F.soft_margin_loss(a, b, reduction=reduction),
          lambda a, b: _torch.nn.functional.soft_margin_loss(a, b, reduction=reduction), [x, s])


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("log_input,full", [(True, False), (False, False), (True, True), (False, True)])
def test_poisson_nll_loss(reduction, log_input, full):
    r = rng(6)
    x = r.standard_normal((3, 4)) if log_input else r.random((3, 4)) + 0.1
    t = r.poisson(2.0, (3, 4)).astype(np.float64)
    check(lambda a, b: F.poisson_nll_loss(a, b, log_input=log_input, full=full, reduction=reduction),
          lambda a, b: _torch.nn.functional.poisson_nll_loss(a, b, log_input=log_input, full=full,
                                                             reduction=reduction), [x, t])


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("var_shape", [(4, 3), (4,), (4, 1), (1, 3)])
def test_gaussian_nll_loss(reduction, var_shape):
    r = rng(7)
    x, t = r.standard_normal((4, 3)), r.standard_normal((4, 3))
    var = r.random(var_shape) + 1e-7  # some entries below eps: clamped for the value, not the gradient
    var.flat[0] = 1e-9
    check(lambda a, b, v: F.gaussian_nll_loss(a, b, v, full=True, reduction=reduction),
          lambda a, b, v: _torch.nn.functional.gaussian_nll_loss(a, b, v, full=True, reduction=reduction),
          [x, t, var], grads=(0, 2), rtol=1e-9)
    check(lambda a, b: F.gaussian_nll_loss(a, b, 0.5, reduction=reduction),
          lambda a, b: _torch.nn.functional.gaussian_nll_loss(a, b, 0.5, reduction=reduction), [x, t])


@needs_torch
def test_loss_modules_match_torch_and_repr():
    r = rng(8)
    x, y = r.standard_normal((5, 4)), r.integers(0, 4, 5)
    pairs = [(nn.MultiMarginLoss(p=2, margin=0.5), _torch.nn.MultiMarginLoss(p=2, margin=0.5), [x, y]),
             (nn.MultiLabelSoftMarginLoss(reduction="sum"), _torch.nn.MultiLabelSoftMarginLoss(reduction="sum"),
              [x, (r.random((5, 4)) > 0.5).astype(np.float64)]),
             (nn.PoissonNLLLoss(full=True), _torch.nn.PoissonNLLLoss(full=True), [x, np.abs(x) * 3]),
             (nn.HingeEmbeddingLoss(margin=2.0), _torch.nn.HingeEmbeddingLoss(margin=2.0),
              [x, np.sign(r.standard_normal((5, 4)))])]
    for em, tm, arrays in pairs:
        assert repr(em) == repr(tm)
        check(em, tm, arrays)
    for em, tm in [(nn.TripletMarginLoss(margin=0.5, p=1), _torch.nn.TripletMarginLoss(margin=0.5, p=1)),
                   (nn.MarginRankingLoss(0.2), _torch.nn.MarginRankingLoss(0.2)),
                   (nn.CosineEmbeddingLoss(), _torch.nn.CosineEmbeddingLoss()),
                   (nn.GaussianNLLLoss(full=True), _torch.nn.GaussianNLLLoss(full=True)),
                   (nn.MultiLabelMarginLoss(), _torch.nn.MultiLabelMarginLoss()),
                   (nn.SoftMarginLoss(reduction="none"), _torch.nn.SoftMarginLoss(reduction="none"))]:
        assert repr(em) == repr(tm)
        assert em.reduction == tm.reduction
    # legacy flags
    with pytest.warns(UserWarning, match="size_average and reduce"):
        assert nn.MarginRankingLoss(size_average=False).reduction == "sum"


@needs_torch
def test_loss_errors_match_torch():
    T, TF = _torch, _torch.nn.functional
    x, y = ember.randn(2, 4), T.randn(2, 4)
    cases = [
        (lambda: F.margin_ranking_loss(ember.randn(3), ember.randn(3), ember.ones(1, 3)),
         lambda: TF.margin_ranking_loss(T.randn(3), T.randn(3), T.ones(1, 3))),
        (lambda: F.margin_ranking_loss(ember.randn(3), ember.randn(3), ember.ones(3), reduction="avg"),
         lambda: TF.margin_ranking_loss(T.randn(3), T.randn(3), T.ones(3), reduction="avg")),
        (lambda: F.cosine_embedding_loss(x, x, ember.ones(2, 1)), lambda: TF.cosine_embedding_loss(y, y, T.ones(2, 1))),
        (lambda: F.cosine_embedding_loss(x, x, ember.ones(())), lambda: TF.cosine_embedding_loss(y, y, T.ones(()))),
        (lambda: F.triplet_margin_loss(x, x, ember.randn(4)), lambda: TF.triplet_margin_loss(y, y, T.randn(4))),
        (lambda: F.triplet_margin_with_distance_loss(x, x, x, margin=0),
         lambda: TF.triplet_margin_with_distance_loss(y, y, y, margin=0)),
        (lambda: nn.TripletMarginLoss(margin=-1), lambda: T.nn.TripletMarginLoss(margin=-1)),
        (lambda: F.multi_margin_loss(x, ember.tensor([0, 9])), lambda: TF.multi_margin_loss(y, T.tensor([0, 9]))),
        (lambda: F.multi_margin_loss(x, ember.tensor([0])), lambda: TF.multi_margin_loss(y, T.tensor([0]))),
        (lambda: F.multi_margin_loss(x, ember.tensor([0, 1]), p=3),
         lambda: TF.multi_margin_loss(y, T.tensor([0, 1]), p=3)),
        (lambda: F.multi_margin_loss(x, ember.tensor([0, 1]), weight=ember.ones(2, 2)),
         lambda: TF.multi_margin_loss(y, T.tensor([0, 1]), weight=T.ones(2, 2))),
        (lambda: F.multi_margin_loss(ember.randn(2, 3, 4), ember.tensor([0, 1])),
         lambda: TF.multi_margin_loss(T.randn(2, 3, 4), T.tensor([0, 1]))),
        (lambda: nn.MultiMarginLoss(p=0), lambda: T.nn.MultiMarginLoss(p=0)),
        (lambda: F.multilabel_margin_loss(x, ember.tensor([0, 1, -1, 0])),
         lambda: TF.multilabel_margin_loss(y, T.tensor([0, 1, -1, 0]))),
        (lambda: F.multilabel_margin_loss(x, ember.tensor([[0, 7, -1, 0]] * 2)),
         lambda: TF.multilabel_margin_loss(y, T.tensor([[0, 7, -1, 0]] * 2))),
        (lambda: F.poisson_nll_loss(x, x, reduction="x"), lambda: TF.poisson_nll_loss(y, y, reduction="x")),
        (lambda: F.gaussian_nll_loss(x, x, -ember.ones(2, 4)), lambda: TF.gaussian_nll_loss(y, y, -T.ones(2, 4))),
        (lambda: F.gaussian_nll_loss(x, x, ember.ones(2, 2)), lambda: TF.gaussian_nll_loss(y, y, T.ones(2, 2))),
        (lambda: F.gaussian_nll_loss(x, x, -1.0), lambda: TF.gaussian_nll_loss(y, y, -1.0)),
        (lambda: F.gaussian_nll_loss(x, x, ember.ones(2, 4), reduction="x"),
         lambda: TF.gaussian_nll_loss(y, y, T.ones(2, 4), reduction="x")),
        (lambda: F.multilabel_soft_margin_loss(x, x, reduction="x"),
         lambda: TF.multilabel_soft_margin_loss(y, y, reduction="x")),
    ]
    for ef, tf in cases:
        errors_match(ef, tf)


# ----------------------------------------------------------------- NumPy / hand references

def test_multi_margin_loss_by_hand():
    x = np.array([[0.1, 0.2, 0.4, 0.8], [0.5, -0.3, 0.0, 0.2]])
    y = np.array([3, 0])
    want = []
    for i in range(2):
        want.append(sum(max(0.0, 1 - x[i, y[i]] + x[i, j]) for j in range(4) if j != y[i]) / 4)
    got = F.multi_margin_loss(ember.tensor(x), ember.tensor(y), reduction="none")
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    assert float(F.multi_margin_loss(ember.tensor(x), ember.tensor(y))) == pytest.approx(np.mean(want))


def test_multilabel_margin_loss_by_hand():
    # torch's documented example: classes 3 and 0 are targets
    x = ember.tensor([[0.1, 0.2, 0.4, 0.8]])
    y = ember.tensor([[3, 0, -1, 1]])
    want = 0.25 * ((1 - (0.1 - 0.2)) + (1 - (0.1 - 0.4)) + (1 - (0.8 - 0.2)) + (1 - (0.8 - 0.4)))
    assert float(F.multilabel_margin_loss(x, y)) == pytest.approx(want, rel=1e-6)


def test_losses_against_numpy():
    r = rng(11)
    a, b = r.standard_normal((5, 3)), r.standard_normal((5, 3))
    y = np.array([1.0, -1.0, 1.0, -1.0, 1.0])
    cos = (a * b).sum(1) / np.sqrt(((a * a).sum(1) + 1e-12) * ((b * b).sum(1) + 1e-12))
    want = np.where(y == 1, 1 - cos, np.maximum(cos - 0.2, 0))
    got = F.cosine_embedding_loss(ember.tensor(a), ember.tensor(b), ember.tensor(y), 0.2, reduction="none")
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    c = r.standard_normal((5, 3))
    d = lambda u, v: (np.abs(u - v + 1e-6) ** 2).sum(1) ** 0.5  # noqa: E731
    want = np.maximum(d(a, b) - d(a, c) + 1.0, 0).mean()
    assert float(F.triplet_margin_loss(ember.tensor(a), ember.tensor(b), ember.tensor(c))) == pytest.approx(want)
    x1, x2 = a[:, 0], b[:, 0]
    want = np.maximum(-y * (x1 - x2) + 0.1, 0).sum()
    got = F.margin_ranking_loss(ember.tensor(x1), ember.tensor(x2), ember.tensor(y), 0.1, reduction="sum")
    assert float(got) == pytest.approx(want)
    want = np.where(y == 1, x1, np.maximum(1 - x1, 0)).mean()
    assert float(F.hinge_embedding_loss(ember.tensor(x1), ember.tensor(y))) == pytest.approx(want)
    t = r.poisson(3.0, (5, 3)).astype(np.float64)
    st = np.where(t > 1, t * np.log(np.maximum(t, 1)) - t + 0.5 * np.log(2 * np.pi * np.maximum(t, 1)), 0)
    want = (np.exp(a) - t * a + st).mean()
    assert float(F.poisson_nll_loss(ember.tensor(a), ember.tensor(t), full=True)) == pytest.approx(want)
    var = r.random((5, 3)) + 0.1
    want = (0.5 * (np.log(var) + (a - b) ** 2 / var) + 0.5 * math.log(2 * math.pi)).sum()
    got = F.gaussian_nll_loss(ember.tensor(a), ember.tensor(b), ember.tensor(var), full=True, reduction="sum")
    assert float(got) == pytest.approx(want)
    lab = (r.random((5, 3)) > 0.5).astype(np.float64)
    ls = lambda v: -np.log1p(np.exp(-v))  # noqa: E731
    want = (-(lab * ls(a) + (1 - lab) * ls(-a))).mean(1).mean()
    assert float(F.multilabel_soft_margin_loss(ember.tensor(a), ember.tensor(lab))) == pytest.approx(want)


def test_gaussian_nll_var_gradient_passes_the_clamp():
    # var below eps: the value uses eps, the gradient is d/dvar of the formula at eps (torch's no_grad clamp)
    var = ember.tensor([1e-9], dtype=ember.float64).requires_grad_()
    x, t = ember.tensor([0.5], dtype=ember.float64), ember.tensor([0.0], dtype=ember.float64)
    F.gaussian_nll_loss(x, t, var, eps=1e-6).backward()
    v = 1e-6
    assert float(var.grad) == pytest.approx(0.5 * (1 / v - 0.25 / v ** 2))


def test_gradcheck_composite_losses():
    from ember.autograd import gradcheck
    r = rng(12)
    x = ember.tensor(r.standard_normal((3, 4))).requires_grad_()
    y = ember.tensor(np.array([1, 0, 3]))
    assert gradcheck(lambda a: F.multi_margin_loss(a, y, p=2, margin=3.0), (x,))
    yl = ember.tensor(np.array([[1, 2, -1, 0], [0, -1, 0, 0], [3, 2, 1, 0]]))
    assert gradcheck(lambda a: F.multilabel_margin_loss(a, yl, reduction="sum"), (x,))
    assert gradcheck(lambda a: F.multilabel_soft_margin_loss(a, (yl > 0).double()), (x,))
    z = ember.tensor(r.standard_normal((3, 4))).requires_grad_()
    assert gradcheck(lambda a, b: F.triplet_margin_loss(a, b, b * 0.5, margin=5.0), (x, z))


# ----------------------------------------------------------------- CTC

CTC_CASES = [  # targets, input_lengths, target_lengths
    (np.array([[1, 2, 2], [3, 3, 0], [4, 1, 1]]), [7, 6, 4], [3, 2, 1]),
    (np.array([1, 2, 2, 3, 3, 4]), [7, 7, 5], [3, 2, 1]),  # concatenated targets
    (np.array([[1, 1, 1], [2, 0, 0], [0, 0, 0]]), [2, 7, 0], [3, 1, 0]),  # impossible, one-label, empty
]


@needs_torch
@pytest.mark.parametrize("case", range(len(CTC_CASES)))
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_loss_matches_torch(case, reduction, zero_infinity):
    tg, il, tl = CTC_CASES[case]
    x = rng(13).standard_normal((7, 3, 5))
    e_tg, t_tg = ember.tensor(tg), _torch.tensor(tg)
    if case == 2 and not zero_infinity:
        e_x, t_x = ember.tensor(x), _torch.tensor(x)
        eo = F.ctc_loss(e_x.log_softmax(2), e_tg, il, tl, reduction=reduction)
        to = _torch.nn.functional.ctc_loss(t_x.log_softmax(2), t_tg, il, tl, reduction=reduction)
        np.testing.assert_allclose(eo.numpy(), to.numpy(), rtol=1e-10)  # inf where no alignment exists
        return
    # through log_softmax: torch's CTC gradient assumes normalized log-probabilities
    check(lambda a: F.ctc_loss(a.log_softmax(2), e_tg, il, tl, reduction=reduction, zero_infinity=zero_infinity),
          lambda a: _torch.nn.functional.ctc_loss(a.log_softmax(2), t_tg, il, tl, reduction=reduction,
                                                  zero_infinity=zero_infinity), [x])


@needs_torch
def test_ctc_module_unbatched_blank_and_errors():
    x = rng(14).standard_normal((6, 4))
    em, tm = nn.CTCLoss(blank=3, zero_infinity=True), _torch.nn.CTCLoss(blank=3, zero_infinity=True)
    assert repr(em) == repr(tm) == "CTCLoss()"
    check(lambda a: em(a.log_softmax(1), ember.tensor([0, 1, 1]), ember.tensor(6), ember.tensor(3)),
          lambda a: tm(a.log_softmax(1), _torch.tensor([0, 1, 1]), _torch.tensor(6), _torch.tensor(3)), [x])
    lp = rng(15).standard_normal((6, 2, 5))
    e, t = ember.tensor(lp), _torch.tensor(lp)
    E, T = ember.tensor([[1, 2], [3, 3]]), _torch.tensor([[1, 2], [3, 3]])
    for ea, ta, kw in [((e, E, [7, 6], [2, 2]), (t, T, [7, 6], [2, 2]), {}),
                       ((e, E, [6, 6], [3, 2]), (t, T, [6, 6], [3, 2]), {}),
                       ((e, E, [6], [2, 2]), (t, T, [6], [2, 2]), {}),
                       ((e, E, [6, 6], [2, -1]), (t, T, [6, 6], [2, -1]), {}),
                       ((e, E, [6, 6], [2, 2]), (t, T, [6, 6], [2, 2]), {"blank": 5}),
                       ((e, E, 6, 2), (t, T, 6, 2), {})]:
        errors_match(lambda: F.ctc_loss(*ea, **kw), lambda: _torch.nn.functional.ctc_loss(*ta, **kw))


def test_ctc_loss_by_hand():
    # T = 2, target "a": alignments "a a", "a -", "- a" -> p = pa0 pa1 + pa0 pb1 + pb0 pa1
    p = np.array([[0.6, 0.4], [0.3, 0.7]])  # columns: blank, a
    lp = ember.tensor(np.log(p)).unsqueeze(1)
    want = -np.log(p[0, 1] * p[1, 1] + p[0, 1] * p[1, 0] + p[0, 0] * p[1, 1])
    got = F.ctc_loss(lp, ember.tensor([[1]]), [2], [1], reduction="sum")
    assert float(got) == pytest.approx(want, rel=1e-12)
    # a repeated label needs a blank between: "a a" over T = 2 has one alignment ("a - a" needs 3 steps)
    got = F.ctc_loss(lp, ember.tensor([[1, 1]]), [2], [2], reduction="none")
    assert float(got) == float("inf")
    assert float(F.ctc_loss(lp, ember.tensor([[1, 1]]), [2], [2], zero_infinity=True)) == 0.0
    # the gradient of the loss (through log_softmax) against central differences
    x = rng(16).standard_normal((5, 2, 4))
    tg, il, tl = ember.tensor([[1, 2], [3, 0]]), [5, 4], [2, 1]
    f = lambda a: float(F.ctc_loss(ember.tensor(a).log_softmax(2), tg, il, tl))  # noqa: E731
    xt = ember.tensor(x).requires_grad_()
    F.ctc_loss(xt.log_softmax(2), tg, il, tl).backward()
    num = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = 1e-6
        num[i] = (f(x + d) - f(x - d)) / 2e-6
    np.testing.assert_allclose(xt.grad.numpy(), num, rtol=1e-5, atol=1e-8)
