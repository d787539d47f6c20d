/* reduce.h — the GPU reductions of ember._cuda (reduce.cu): the entries
 * behind EmCudaBackend.has_reduce / .reduce (Note [CUDA reduce] in
 * cuda_backend.h). Plain C declarations, included by C++ and nvcc. */
#ifndef EMBER_CUDA_REDUCE_H
#define EMBER_CUDA_REDUCE_H

#include "../cuda_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether reduce.cu has a kernel for `op` (the CPU table's name) and the
 * input dtype (an EmDType code). */
bool em_cuda_has_reduce(const char *op, int in_dtype);

/* Launch one reduction on `dev`'s current stream; returns when queued.
 * 0, or -1 with a message (the runtime's error buffer when built with
 * csrc/cuda/runtime.h, else em_cuda_reduce_last_error()). */
int em_cuda_reduce(int dev, const EmCudaReduce *r);

/* The same on an explicit stream (a cudaStream_t; NULL: the default stream). */
int em_cuda_reduce_on(int dev, const EmCudaReduce *r, void *stream);

/* The latest failure's message (thread-local). */
const char *em_cuda_reduce_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
