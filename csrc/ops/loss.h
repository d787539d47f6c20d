/* loss.h — what the loss front-ends (ops/loss.c) share with their backward
 * formulas (autograd/derivatives_loss.c): the kinds of _pointwise_loss (its
 * `kind` argument, see ops.def) and the elementwise terms they compute. */
#ifndef EMBER_OPS_LOSS_H
#define EMBER_OPS_LOSS_H

#include "../ember.h"

enum { EM_LOSS_MSE = 0, EM_LOSS_SMOOTH_L1 = 1, EM_LOSS_HUBER = 2, EM_LOSS_BCE = 3, EM_LOSS_BCE_LOGITS = 4 };

/* The unreduced, unweighted loss of one kind with ember ops (recorded when
 * grad mode is on): new reference or NULL. pos_weight may be NULL. */
PyObject *em_pointwise_loss_terms(int kind, PyObject *x, PyObject *y, PyObject *pos_weight, double param);
/* softplus(-x) = -log(sigmoid(x)) without overflow. */
PyObject *em_softplus_neg(PyObject *x);

#endif
