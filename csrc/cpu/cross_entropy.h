/* cross_entropy.h — the fused cross-entropy kernels (cpu/cross_entropy.c)
 * and what their front-end (ops/cross_entropy.c) passes them.
 *
 * Note [fused cross-entropy]: for logits x of a position (C classes), class
 * weights w (all ones without weight=), target t and label smoothing e, the
 * loss torch composes as (1 - e) * nll(log_softmax(x)) + e / C * smooth is
 *
 *   lse  = max(x) + log(sum exp(x - max(x)))
 *   loss = (1 - e) w[t] (lse - x[t]) + e / C * sum_c w[c] (lse - x[c])
 *
 * and its gradient for x, times the position's scale s (the incoming
 * gradient, / total weight for reduction='mean'; 0 where t is ignored), is
 *
 *   gi[c] = s * (exp(x[c] - lse) * ((1 - e) w[t] + e / C * sum(w))
 *                - (1 - e) w[t] [c == t] - e / C * w[c]).
 *
 * The forward reads each row of logits once (max, then exp-sum) without
 * writing log-probabilities; the backward reads it once more with the saved
 * lse and writes the gradient. Layout is Note [nll layout]. */
#ifndef EMBER_CPU_CROSS_ENTROPY_H
#define EMBER_CPU_CROSS_ENTROPY_H

#include "softmax.h"

typedef struct {
    EmNll nll;        /* x [N, C, inner], t [N, inner], w [C] or NULL, dt, ignore */
    double smoothing; /* e, in [0, 1] */
} EmXent;

/* lse ([N, inner], dt) per position; terms ([N, inner]) the unreduced loss
 * and wt ([N, inner]) the weight w[t] counted by reduction='mean' — both 0
 * where the target is ignored (lse is still written there). 0, or -1 when
 * scratch memory could not be had. */
int em_cpu_xent_forward(const EmXent *p, char *lse, double *terms, double *wt);
/* gi ([N, C, inner], dt) from the saved lse and the per-position scale s. */
int em_cpu_xent_backward(const EmXent *p, const char *lse, const double *s, char *gi);

#endif
