/* random.h — the GPU random fill (Note [GPU random numbers]): the entry
 * EmCudaBackend.random_fill points at. */
#ifndef EMBER_CUDA_RANDOM_H
#define EMBER_CUDA_RANDOM_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
int em_cuda_random_fill(int dev, int kind, int dtype, void *out, int64_t numel, uint64_t seed,
                        uint64_t offset, double a, double b, int64_t from, uint64_t range);
#ifdef __cplusplus
}
#endif
#endif
