/* op_table.c — em_op_defs, the op table built from ops.def's rows (Note [op
 * row] in ember.h). Each row's tokens become the fields the dispatcher,
 * autocast and autograd read; a row naming an impl or kernel table that does
 * not exist fails to link, and a column token that is not one of those below
 * fails to compile. The last column, the backward formula, is autograd's:
 * this layer reads the row without it (autograd/derivative_table.c). */
#include "../ember.h"

/* impls and kernel tables named by the rows */
#define OP(name, sig, impl, kernels, ...) PyObject *em_impl_##impl(EmCall *c);
#include "ops.def"
#undef OP
extern const EmKernels em_kernels_none;
#define OP(name, sig, impl, kernels, ...) extern const EmKernels em_kernels_##kernels;
#include "ops.def"
#undef OP
/* CUDA front-ends (Note [device slot]). Only the rows with CUDA_IMPL take
 * their address (the initializer's condition is a constant), so only those
 * must exist; hidden, so a missing one fails the link of _C rather than its
 * import. */
#define OP(name, sig, impl, kernels, ...) \
    __attribute__((visibility("hidden"))) PyObject *em_impl_##impl##_cuda(EmCall *c);
#include "ops.def"
#undef OP

/* variants */
#define F EM_VARIANT_FN
#define M EM_VARIANT_METHOD
#define I EM_VARIANT_INPLACE
/* devices */
#define CPU EM_RUNS_CPU
#define ANY EM_RUNS_ANY
#define CUDA EM_RUNS_CUDA
#define MIXED EM_RUNS_MIXED
#define CPU_INDEX EM_RUNS_CPU_INDEX
#define DEVICE_ARG EM_RUNS_DEVICE_ARG
#define ANY_BASIC_KEY EM_RUNS_ANY_BASIC_KEY
#define META EM_RUNS_META
#define CUDA_IMPL (EM_RUNS_CUDA | EM_RUNS_CUDA_IMPL)
/* tags */
#define VIEW EM_TAG_VIEW
#define INPLACE EM_TAG_INPLACE
#define WRITES EM_TAG_WRITES
#define GEOMETRY EM_TAG_GEOMETRY
#define POINTWISE EM_TAG_POINTWISE
#define DETACHES EM_TAG_DETACHES
#define FORMAT EM_TAG_FORMAT
/* autocast */
#define AC(cpu, cuda) {EM_CAST_##cpu, EM_CAST_##cuda}
#define NOCAST AC(NONE, NONE)

EmOpDef em_op_defs[EM_NUM_OPS] = {
#define OP(name, sig, impl, kernels, variants, devices, tags, autocast, backward) \
    [EM_OP_##name] = {#name, sig, em_impl_##impl, &em_kernels_##kernels, variants, devices, tags, autocast, \
                      .cuda_impl = ((devices) & EM_RUNS_CUDA_IMPL) ? em_impl_##impl##_cuda : NULL},
#include "ops.def"
#undef OP
};
const EmKernels em_kernels_none = {{0}, "none"};
