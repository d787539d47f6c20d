/* index.h — the GPU indexing kernels of ember._cuda (index.cu): the
 * entries behind EmCudaBackend's "indexing" block.
 *
 * Note [CUDA indexing]: the core's indexing front-ends (ops/index*.c,
 * ops/scatter_gather.c, one_hot) validate and lay out one loop description
 * for both devices (ops/index_gpu.h); these entries are the GPU twins of
 * cpu/index.c's loops:
 *   - index_offsets: index values -> byte offsets along one dim (several
 *     index tensors accumulate), checking [0, size) after wrapping; the
 *     first bad position (row-major, by atomicMin) and its value come back
 *     with one sync, before anything user-visible is written;
 *   - index_gather / index_put: Note [indirect loops], a thread per element
 *     of P x J x A; puts combine atomically (sum: native atomicAdd where the
 *     hardware has it, CAS loops otherwise, the CPU's NaN rules);
 *   - scatter_gather: Note [scatter loops], a thread per index element;
 *     gathers flag an index outside [0, size) (the front-end then names the
 *     first one through index_offsets);
 *   - nonzero_scan / nonzero_fill: flags, an in-place CUB inclusive scan,
 *     one read of the total, then a compaction in row-major order.
 * The per-element index math is in __host__ __device__ functions
 * (emc_index_*), so a host build can check it against the CPU. */
#ifndef EMBER_CUDA_INDEX_H
#define EMBER_CUDA_INDEX_H

#include "../cuda_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

int em_cuda_index_offsets(int dev, int64_t *off, bool accumulate, const void *idx, int idx_dtype, int nb,
                          const int64_t *bshape, const int64_t *idx_strides, int64_t size, int64_t stride, int wrap,
                          int64_t *bad_pos, int64_t *bad_val);
int em_cuda_index_gather(int dev, const EmCudaIndirect *g, int itemsize);
int em_cuda_index_put(int dev, const EmCudaIndirect *g, int op, int dtype);
int em_cuda_scatter_gather(int dev, const EmCudaScatter *g, int op, int dtype, bool gather);
int em_cuda_nonzero_scan(int dev, const void *in, int dtype, int ndim, const int64_t *sizes, const int64_t *strides,
                         int64_t *scan, int64_t *count);
int em_cuda_nonzero_fill(int dev, const void *in, int dtype, int ndim, const int64_t *sizes, const int64_t *strides,
                         const int64_t *scan, int64_t *coords, int64_t *offs, const int64_t *ostrides);

#ifdef __cplusplus
}
#endif
#endif
