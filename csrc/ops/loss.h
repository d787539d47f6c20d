/* loss.h — what the loss front-ends (ops/loss.c) share with their backward
 * formulas (autograd/derivatives_loss.c): the kinds of _pointwise_loss (its
 * `kind` argument, see ops.def) and the elementwise terms they compute; the
 * NLL operand checks the fused cross-entropy (ops/cross_entropy.c) reuses. */
#ifndef EMBER_OPS_LOSS_H
#define EMBER_OPS_LOSS_H

#include "../ember.h"
#include "../cpu/softmax.h"

enum { RED_NONE = 0, RED_MEAN = 1, RED_SUM = 2 }; /* torch's reduction enum */

/* Argument i as a reduction (ValueError for anything but 0, 1, 2). 0 / -1. */
int em_arg_reduction(EmCall *c, int i, int64_t *r);

/* nll_loss's operands checked against torch's shape rules and made ready
 * for the kernels (Note [nll layout]): input in its compute dtype, int64
 * target, weight or NULL — contiguous. Shared with the fused cross-entropy
 * (ops/cross_entropy.c). Release with em_nll_clear. */
typedef struct {
    EmTensor *x, *t, *w;
    EmNll p;
} NllArgs;
/* gpu: the caller is a CUDA front-end (Note [device slot]) */
int em_nll_prepare(bool gpu, EmTensor *in, EmTensor *target, EmTensor *weight, int64_t ignore, NllArgs *a);
void em_nll_clear(NllArgs *a);
/* sum of weight[t] (1 without weight) over the targets not equal to ignore:
 * reduction='mean''s divisor (ops/cross_entropy.c). 0 / -1. */
int em_nll_total_weight(EmTensor *target, EmTensor *weight, int64_t ignore, double *total);

enum { EM_LOSS_MSE = 0, EM_LOSS_SMOOTH_L1 = 1, EM_LOSS_HUBER = 2, EM_LOSS_BCE = 3, EM_LOSS_BCE_LOGITS = 4 };

/* The unreduced, unweighted loss of one kind with ember ops (recorded when
 * grad mode is on): new reference or NULL. pos_weight may be NULL. */
PyObject *em_pointwise_loss_terms(int kind, PyObject *x, PyObject *y, PyObject *pos_weight, double param);
/* softplus(-x) = -log(sigmoid(x)) without overflow. */
PyObject *em_softplus_neg(PyObject *x);

#endif
