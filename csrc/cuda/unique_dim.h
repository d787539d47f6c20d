/* unique_dim.h — unique / unique_consecutive along a dim on the GPU
 * (unique_dim.cu): the entry behind EmCudaBackend's `unique_dim`, and the
 * per-row logic the kernels and the fake backend (csrc/testing/cuda_fake.c)
 * share, so the tests on a machine without a GPU run it against the CPU's
 * unique (ops/sort.c). Plain C that nvcc compiles __host__ __device__.
 *
 * Note [CUDA unique dim]: the front-end (ops/sort.c) moves the dim first and
 * makes the tensor contiguous: m rows of rl elements. Rows compare by their
 * elements' sort keys (Note [CUDA sort keys], sort_logic.h) left to right,
 * ties by row index — so sorting row indices with this order is the CPU's
 * stable lexicographic sort (cub::DeviceMergeSort on the device). Neighbours
 * in that order are one group when every key agrees and the row holds no
 * NaN (Note [unique equality]: NaNs are never equal). Then as for unique
 * with dim=None: flags where a group starts, an inclusive scan numbers the
 * groups, the first row of each group is copied (as bits) to vals, the
 * inverse and the counts are scattered, and the number of groups is read
 * back. */
#ifndef EMBER_CUDA_UNIQUE_DIM_H
#define EMBER_CUDA_UNIQUE_DIM_H

#include "../cuda_backend.h"
#include "sort_logic.h"

/* Row a before row b in the sorted order (x contiguous [m, rl] of dtype dt). */
EMC_HD bool emc_row_less(const void *x, int dt, int64_t rl, int64_t a, int64_t b) {
    for (int64_t j = 0; j < rl; j++) {
        uint64_t ka = emc_sort_key(x, a * rl + j, dt), kb = emc_sort_key(x, b * rl + j, dt);
        if (ka != kb) return ka < kb;
    }
    return a < b;
}

/* Whether position i (of m, in `order`: row indices, NULL = the identity)
 * starts a new group: i == 0, or its row differs from the previous one or
 * holds a NaN. */
EMC_HD bool emc_row_group_start(const void *x, int dt, int64_t rl, const int64_t *order, int64_t i) {
    if (i == 0) return true;
    int64_t a = order ? order[i] : i, b = order ? order[i - 1] : i - 1;
    uint64_t nan = emc_key_mask(dt);
    bool fl = emc_is_float(dt);
    for (int64_t j = 0; j < rl; j++) {
        uint64_t ka = emc_sort_key(x, a * rl + j, dt);
        if (ka != emc_sort_key(x, b * rl + j, dt) || (fl && ka == nan)) return true;
    }
    return false;
}

#ifdef __cplusplus
extern "C" {
#endif

int em_cuda_unique_dim(int dev, int dtype, const void *x, int64_t m, int64_t rl, bool sorted, void *vals,
                       int64_t *inverse, int64_t *counts, int64_t *groups);

#ifdef __cplusplus
}
#endif
#endif
