/* index_gpu.h — the indexing loops on either device (Note [CUDA indexing]
 * in csrc/cuda/index.h). The indexing front-ends (ops/index_advanced.c,
 * ops/scatter_gather.c, ops/index.c, one_hot in ops/join.c) validate and
 * lay out their loops once; these helpers run each loop on the device of
 * the tensor it indexes: cpu/index.c's loops for CPU tensors, the backend's
 * indexing entries for GPU tensors. Offset arrays live on the same device
 * (em_index_offsets_alloc). */
#ifndef EMBER_OPS_INDEX_GPU_H
#define EMBER_OPS_INDEX_GPU_H

#include "../ember.h"

/* 0 when t's indexing loops can run where t lives (the CPU, or a GPU whose
 * backend has the indexing entries); else EmNoCudaKernel (Note [CUDA
 * fallback]: raised before anything is allocated or written), -1. */
int em_index_device_ok(const EmTensor *t, const char *opname);

/* n int64 offsets on dev: PyMem on the CPU, a device tensor (*hold, to free
 * with the array) on a GPU. NULL with an exception. */
int64_t *em_index_offsets_alloc(EmDevice dev, int64_t n, EmTensor **hold);
void em_index_offsets_free(int64_t *off, EmTensor *hold);
/* n host offsets copied to dev (the same array on the CPU). */
int64_t *em_index_offsets_upload(EmDevice dev, const int64_t *host, int64_t n, EmTensor **hold);

/* em_cpu_index_offsets on dev (off on dev; a CPU idx is moved to a GPU dev
 * first): -1 when every value is in range, the first bad position (its
 * value in *bad), or -2 with an exception. */
int64_t em_index_offsets(EmDevice dev, int64_t *off, bool accumulate, EmTensor *idx, int nb,
                         const int64_t *bshape, int64_t size, int64_t stride, int wrap, int64_t *bad);

/* Note [indirect loops] / [scatter loops] on dev; 0 / -1. */
int em_index_gather_on(EmDevice dev, const EmIndirect *g, int itemsize);
int em_index_put_on(EmDevice dev, const EmIndirect *g, EmReduceOp op, EmDType dtype, bool outer_parallel);
int em_scatter_on(EmDevice dev, const EmScatterLoop *g, EmReduceOp op, EmDType dtype);
/* 1: all indices in range; 0: one was outside [0, g->size); -1 error */
int em_gather_on(EmDevice dev, const EmScatterLoop *g, int itemsize);

/* The byte offsets (strides ostrides) of t's nonzero elements in row-major
 * order on t's device, *n their count (em_index_offsets_free them). */
int64_t *em_index_nonzero_offsets(EmTensor *t, const int64_t *ostrides, int64_t *n, EmTensor **hold);
/* Note [meta device]: a mask's nonzero count is data, so what needs it
 * (x[mask], nonzero) raises torch's NotImplementedError on meta. -1. */
int em_index_meta_nonzero_error(void);
/* nonzero(t) as [n, ndim] int64 on t's device (a GPU t with the entries). */
EmTensor *em_index_nonzero_gpu(EmTensor *t);

#endif
