/* nn_kernels.h — the GPU kernels behind the dropout, NLL, norm-run and 2-d
 * pool entries of EmCudaBackend (cuda_backend.h): dropout's mask-and-scale,
 * the negative log-likelihood forward and backward, batch / group norm's run
 * kernels, and the max / average / adaptive average 2-d pools with their
 * backward (the row-wise fused kernels are nn_fused.h's).
 * Each em_cuda_<name> has exactly the signature of its table entry.
 *
 * Note [CUDA nn kernels]: operands are contiguous (the front-ends in csrc/ops
 * make them so). Dropout reads and writes its data's own dtype (halves
 * computed in float32) and draws its mask from the Philox stream exactly as
 * random_fill's Bernoulli does (Note [GPU random numbers]), so a mask equals
 * bernoulli_(1 - p) on the same generator state. NLL and the norm runs see
 * the compute dtype only (float32 / float64: the front-ends widen halves, as
 * for the CPU kernels), and so do the 2-d pools (Note [pool planes]). Sums are in float64, one block per output, in a
 * fixed order: results do not vary between runs. Note [norm runs]
 * (cpu/poolnorm.h) is kept: the kernels compute per-run sums and per-run
 * affine maps, and the front-end (ops/poolnorm.c) combines runs into
 * channel or group statistics on the host, as it does for the CPU. */
#ifndef EMBER_CUDA_NN_KERNELS_H
#define EMBER_CUDA_NN_KERNELS_H

#include "../cuda_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

int em_cuda_dropout(int dev, int dtype, void *out, bool *mask, const void *in, int64_t numel, double keep,
                    double scale, uint64_t seed, uint64_t offset);
int em_cuda_nll_loss(int dev, int dtype, void *loss, const void *x, const int64_t *target, const void *weight,
                     int64_t N, int64_t C, int64_t inner, int64_t ignore, int reduction, double *work, int64_t *bad);
int em_cuda_nll_loss_backward(int dev, int dtype, void *gi, const void *grad, const int64_t *target,
                              const void *weight, int64_t N, int64_t C, int64_t inner, int64_t ignore, int reduction,
                              double *work, int64_t *bad);
int em_cuda_norm_runs_stats(int dev, int dtype, const void *g, const void *x, int64_t R, int64_t S,
                            const double *center, double *out1, double *out2);
int em_cuda_norm_runs_affine(int dev, int dtype, void *y, const void *g, const void *x, int64_t R, int64_t S,
                             const double *a, const double *b, const double *c);
int em_cuda_max_pool2d(int dev, int dtype, const EmCudaPool2d *g, const void *in, void *out, int64_t *idx);
int em_cuda_max_pool2d_backward(int dev, int dtype, const EmCudaPool2d *g, const void *grad, const int64_t *idx,
                                void *gi, int64_t *work, int64_t *bad);
int em_cuda_avg_pool2d(int dev, int dtype, int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW,
                       const int64_t *win, const double *div, const void *in, void *out, bool backward);

#ifdef __cplusplus
}
#endif
#endif
