/* derivative_table.c — em_derivatives, built from the backward column of
 * ops.def's rows (Note [op row] in ember.h): BW(fn, saves, "NodeName"),
 * BW_NAMED(fn, saves, namer) where torch's node name depends on the call,
 * NO_FORMULA (torch differentiates the op, ember has no formula yet) or
 * NOGRAD. The ops layer reads the row without this column; only autograd
 * expands it, so the table of formulas is the op table's. */
#include "formula.h" /* the prototypes of the formulas and namers the rows name */

/* the saves tokens: which inputs / outputs the formula reads */
#define ALLIN EM_SAVE_ALL_IN
#define IN0 EM_SAVE_IN(0)
#define IN1 EM_SAVE_IN(1)
#define IN2 EM_SAVE_IN(2)
#define SOUT EM_SAVE_OUT
#define SAUX EM_SAVE_AUX_OUT
#define BW(fn, saves, name) {fn, saves, name, NULL, #fn, false}
#define BW_NAMED(fn, saves, namer) {fn, saves, NULL, namer, #fn, false}
#define NOGRAD {NULL, 0, NULL, NULL, NULL, false}
#define NO_FORMULA {NULL, 0, NULL, NULL, NULL, true}

const EmDerivative em_derivatives[EM_NUM_OPS] = {
#define OP(name, sig, impl, kernels, variants, devices, tags, autocast, backward) [EM_OP_##name] = backward,
#include "../ops/ops.def"
#undef OP
};
