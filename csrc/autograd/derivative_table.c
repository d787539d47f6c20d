/* derivative_table.c — em_derivatives, built from the backward column of
 * ops.def's rows (Note [op row] in ember.h): BW(fn, saves, "NodeName"),
 * BW_NAMED(fn, saves, namer) where torch's node name depends on the call,
 * RAISES(fn, "NodeName") (torch records a node whose backward raises),
 * NO_FORMULA (torch differentiates the op, ember has no formula yet),
 * NOGRAD, or NOGRAD_IN_PLACE(namer) (not differentiable, but torch's
 * in-place form on a graph tensor records a zero gradient: x.eq_(y)). The ops
 * layer reads the row without this column; only autograd expands it, so the
 * table of formulas is the op table's. */
#include "formula.h" /* the prototypes of the formulas and namers the rows name */

/* the saves tokens: which inputs / outputs the formula reads */
#define ALLIN EM_SAVE_ALL_IN
#define IN0 EM_SAVE_IN(0)
#define IN1 EM_SAVE_IN(1)
#define IN2 EM_SAVE_IN(2)
#define SOUT EM_SAVE_OUT
#define SAUX EM_SAVE_AUX_OUT
#define BW(fn, saves, name) {fn, saves, name, NULL, #fn, false, false}
#define BW_NAMED(fn, saves, namer) {fn, saves, NULL, namer, #fn, false, false}
#define RAISES(fn, name) {fn, 0, name, NULL, #fn, false, true}
#define NOGRAD {NULL, 0, NULL, NULL, NULL, false, false}
#define NOGRAD_IN_PLACE(namer) NOGRAD
#define NO_FORMULA {NULL, 0, NULL, NULL, NULL, true, false}

const EmDerivative em_derivatives[EM_NUM_OPS] = {
#define OP(name, sig, impl, kernels, variants, devices, tags, autocast, backward) [EM_OP_##name] = backward,
#include "../ops/ops.def"
#undef OP
};

/* the same column read again for the in-place forms' nodes: only
 * NOGRAD_IN_PLACE rows have one */
#undef BW
#undef BW_NAMED
#undef RAISES
#undef NOGRAD
#undef NOGRAD_IN_PLACE
#undef NO_FORMULA
#define BW(fn, saves, name) {0}
#define BW_NAMED(fn, saves, namer) {0}
#define RAISES(fn, name) {0}
#define NOGRAD {0}
#define NOGRAD_IN_PLACE(namer) {bw_zero, 0, NULL, namer, "bw_zero", false, false}
#define NO_FORMULA {0}
int bw_zero(EmNode *n, EmTensor **go, EmTensor **gi);

const EmDerivative em_in_place_derivatives[EM_NUM_OPS] = {
#define OP(name, sig, impl, kernels, variants, devices, tags, autocast, backward) [EM_OP_##name] = backward,
#include "../ops/ops.def"
#undef OP
};
