/* sort.h — the GPU sorting, selection, scan, search and unique kernels of
 * ember._cuda (sort.cu): the entries behind the "sort and scan"
 * part of EmCudaBackend (cuda_backend.h). Each em_cuda_<name> has exactly
 * the signature of its table entry.
 *
 * Note [CUDA sort]: every operand is contiguous; the core's front-ends
 * (ops/sort.c, ops/reduce.c) move the sorted / scanned dim innermost (sort,
 * selections) or describe the block as [outer, n, inner] (scans). Sorting
 * turns each element into its key (Note [CUDA sort keys], sort_logic.h) and
 * sorts (key, index) pairs stably with CUB — one DeviceRadixSort for a single
 * row, DeviceSegmentedSort::StableSortPairs for many — so the order, ties
 * and NaN placement are the CPU's. The per-row logic (kthvalue's torch
 * quickselect, the median / mode picks, the sequential scans, the binary
 * searches, unique's grouping) lives in sort_logic.h, shared with the fake
 * backend. unique numbers groups with cub::DeviceScan. Scratch memory comes
 * from the caching allocator on the current stream; entries return when
 * queued, except searchsorted with a sorter (a bounds flag) and unique (the
 * number of groups), which read a value back. */
#ifndef EMBER_CUDA_SORT_H
#define EMBER_CUDA_SORT_H

#include "../cuda_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

int em_cuda_sort_rows(int dev, int dtype, const void *in, int64_t rows, int64_t n, bool descending,
                      int64_t m, void *values, int64_t *indices);
int em_cuda_select_rows(int dev, int kind, int dtype, const void *in, int64_t rows, int64_t n, int64_t k,
                        void *values, int64_t *indices);
int em_cuda_scan(int dev, int op, int dtype, const void *in, void *out, int64_t *indices, int64_t outer,
                 int64_t n, int64_t inner);
int em_cuda_search(int dev, int dtype, const void *boundaries, const int64_t *sorter, int64_t rows, int64_t L,
                   const void *values, int64_t nval, int64_t per_row, bool right, bool out_int32, void *out);
int em_cuda_unique(int dev, int dtype, const void *sorted, const int64_t *perm, int64_t n, void *vals,
                   int64_t *inverse, int64_t *counts, int64_t *groups);

#ifdef __cplusplus
}
#endif
#endif
