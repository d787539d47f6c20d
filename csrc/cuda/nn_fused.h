/* nn_fused.h — the GPU kernels behind the "fused nn kernels" entries of
 * EmCudaBackend (cuda_backend.h): softmax / log_softmax and their backward,
 * layer / rms norm forward and layer norm backward, cross-entropy forward and
 * backward from class indices, multi-tensor Adam/AdamW, embedding gather and
 * its scatter-add backward. Each em_cuda_<name> has exactly the signature of
 * its table entry, so ember._cuda's table points at it directly.
 *
 * Note [CUDA fused nn]: every operand is contiguous (the core's front-ends,
 * csrc/ops, make it so); data in float16 / bfloat16 is read and written
 * in its own dtype and computed in float32, float64 data in float64; row
 * statistics (max, sums, mean, variance) are float32 (float64) and reduced
 * per row by one block. Kernels run on the device's current stream and the
 * entries return when they are queued, except where a bounds check must
 * answer (cross-entropy targets, embedding indices): those read one small
 * flag back and so wait for the stream. */
#ifndef EMBER_CUDA_NN_FUSED_H
#define EMBER_CUDA_NN_FUSED_H

#include "../cuda_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

int em_cuda_softmax(int dev, int dtype, void *out, const void *in, int64_t outer, int64_t n, int64_t inner,
                    bool log);
int em_cuda_softmax_backward(int dev, int dtype, void *gi, const void *g, const void *y, int64_t outer, int64_t n,
                             int64_t inner, bool log);
int em_cuda_layer_norm(int dev, int dtype, void *y, void *mean, void *rstd, const void *x, const void *w,
                       const void *b, int64_t rows, int64_t n, double eps);
int em_cuda_layer_norm_backward(int dev, int dtype, void *dx, void *dw, void *db, const void *g, const void *x,
                                const void *mean, const void *rstd, const void *w, int64_t rows, int64_t n);
int em_cuda_cross_entropy(int dev, int dtype, void *loss, void *lse, const void *x, const int64_t *target,
                          const void *weight, int64_t N, int64_t C, int64_t inner, int64_t ignore, double smoothing,
                          int reduction, double *work, int64_t *bad);
int em_cuda_cross_entropy_backward(int dev, int dtype, void *gi, const void *grad, const void *x,
                                   const int64_t *target, const void *weight, const void *lse, int64_t N, int64_t C,
                                   int64_t inner, int64_t ignore, double smoothing, int reduction, double *work,
                                   int64_t *bad);
int em_cuda_adam(int dev, const EmCudaAdam *a);
int em_cuda_embedding(int dev, int dtype, void *out, const void *weight, const void *indices, int idx_dtype,
                      int64_t n_idx, int64_t num_weights, int64_t dim, int64_t *bad);
int em_cuda_embedding_backward(int dev, int dtype, void *gw, const void *g, const void *indices, int idx_dtype,
                               int64_t n_idx, int64_t num_weights, int64_t dim, int64_t padding_idx,
                               bool scale_grad_by_freq);

#ifdef __cplusplus
}
#endif
#endif
