/* randperm.h — randperm on the GPU (randperm.cu): the entry behind
 * EmCudaBackend's `randperm` (cuda_backend.h), and the per-element key both
 * it and the fake backend (csrc/testing/cuda_fake.c) compute, so the two give
 * the same permutation.
 *
 * Note [GPU randperm]: a permutation from random keys, as torch builds its
 * GPU randperm: element i gets the 64-bit key em_randperm_key(seed, offset,
 * i), the Philox stream's 64-bit integer draw i (Note [GPU random numbers],
 * philox.h: block i / 2, words 2(i % 2) and 2(i % 2) + 1, exactly what
 * random_fill draws for EM_RANDOM_INTEGER with range 0), and the indices
 * 0..n-1 are sorted stably by key as unsigned integers (CUB's radix sort on
 * the device, a stable comparison sort on the fake). Equal keys (chance
 * about n^2 / 2^65) keep index order, which every implementation agrees on,
 * so a seed gives one permutation everywhere. One launch consumes one
 * Philox offset of the generator, as a random fill does. */
#ifndef EMBER_CUDA_RANDPERM_H
#define EMBER_CUDA_RANDPERM_H

#include "../cuda_backend.h"
#include "philox.h"

/* Key i of Note [GPU randperm]. */
EM_HD uint64_t em_randperm_key(uint64_t seed, uint64_t offset, int64_t i) {
    EmPhilox4 w = em_philox_block(seed, offset, (uint64_t)i >> 1);
    int k = (int)(i & 1);
    return (uint64_t)w.v[2 * k + 1] << 32 | w.v[2 * k];
}

#ifdef __cplusplus
extern "C" {
#endif

int em_cuda_randperm(int dev, int dtype, void *out, int64_t n, uint64_t seed, uint64_t offset);

#ifdef __cplusplus
}
#endif
#endif
