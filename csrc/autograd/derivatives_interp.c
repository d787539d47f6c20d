/* derivatives_interp.c — backward formulas of the upsampling ops
 * (ops/interp.c). Upsampling is linear in its input, so
 *   d upsample_X(x)            = upsample_X_backward(g, output_size, x.shape, ...)
 *   d upsample_X_backward(g)   = upsample_X(gg, output_size, ...)
 * (each op's adjoint is the other), which makes double backward work. */
#include "formula.h"


/* forward (input, output_size, [align_corners], scales...) ->
 * backward (grad, output_size, input_size, [align_corners], scales...) */
static int grad_of_forward(EmNode *n, EmTensor **go, EmTensor **gi, EmOpId back) {
    BEGIN;
    if (need(n, 0)) {
        int np = em_op_defs[n->op].sig.nparams;
        PyObject *args[EM_MAX_PARAMS + 1] = {G(0), ARG(1), IN_SIZE(0)};
        for (int i = 2; i < np; i++) args[i + 1] = ARG(i);
        SET(0, call_n(S, back, np + 1, args));
    }
    END;
}

/* backward (grad, output_size, input_size, [align_corners], scales...) ->
 * forward (gg, output_size, [align_corners], scales...) */
static int grad_of_backward(EmNode *n, EmTensor **go, EmTensor **gi, EmOpId fwd) {
    BEGIN;
    if (need(n, 0)) {
        int np = em_op_defs[n->op].sig.nparams;
        PyObject *args[EM_MAX_PARAMS] = {G(0), ARG(1)};
        for (int i = 3; i < np; i++) args[i - 1] = ARG(i);
        SET(0, call_n(S, fwd, np - 1, args));
    }
    END;
}

#define PAIR(f)                                                                          \
    int bw_##f(EmNode *n, EmTensor **go, EmTensor **gi) {                         \
        return grad_of_forward(n, go, gi, EM_OP_##f##_backward);                         \
    }                                                                                    \
    int bw_##f##_backward(EmNode *n, EmTensor **go, EmTensor **gi) {              \
        return grad_of_backward(n, go, gi, EM_OP_##f);                                   \
    }
PAIR(_upsample_nearest1d)
PAIR(_upsample_nearest2d)
PAIR(_upsample_nearest_exact1d)
PAIR(_upsample_nearest_exact2d)
PAIR(_upsample_linear1d)
PAIR(_upsample_bilinear2d)
PAIR(_upsample_bicubic2d)


