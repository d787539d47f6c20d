/* shape.h — the shape kernels of ember._cuda (shape.cu): the entries behind
 * EmCudaBackend.arange_fill / linspace_fill / tri_mask / repeat_interleave.
 *
 * Note [CUDA shape kernels]: most shape, join and factory ops need no kernel
 * of their own on a GPU: cat/stack copy each input into a narrowed view of
 * the output, repeat/tile copy a stride-0 alias, flip a negative-stride one,
 * roll two narrowed halves, eye fills zeros and then the diagonal view —
 * all through the strided copy (copy_strided.cu). The four entries here are
 * what a copy cannot say: the range fills (values computed per index, by
 * the CPU's formulas in shape_rules.h), the triangle mask, and
 * repeat_interleave with per-index counts (a binary search of the running
 * totals, which the core computes on the host since it needs the total to
 * size the output anyway). Plain C declarations. */
#ifndef EMBER_CUDA_SHAPE_H
#define EMBER_CUDA_SHAPE_H

#include "../cuda_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

int em_cuda_arange_fill(int dev, int dtype, void *out, int64_t n, int64_t stride, bool int_math,
                        int64_t start, int64_t step, double xs, double xt);
int em_cuda_linspace_fill(int dev, int dtype, void *out, int64_t steps, int64_t stride, double xs,
                          double xe, bool log, double base);
int em_cuda_tri_mask(int dev, int dtype, void *data, int ndim, const int64_t *sizes,
                     const int64_t *strides, int64_t k, bool lower);
int em_cuda_repeat_interleave(int dev, int dtype, void *out, const void *in, int64_t outer, int64_t n,
                              int64_t inner, const int64_t *cum, int64_t total);

#ifdef __cplusplus
}
#endif
#endif
