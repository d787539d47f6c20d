// cuda_attention_index_check.cpp — a host check of the index math the GPU
// flash attention kernels share with it (csrc/cuda/attention.h): the
// mma.m16n8k16 fragment maps cover each tile element exactly once, the
// accumulator tiles of p reused as the A operand of p v land on the same
// (row, key) positions, and the tile-skipping rules (causal key tiles, first
// query tile in the backward, which tiles need the element mask) agree with
// a brute-force scan of the visible (query, key) pairs; dropout's keep test
// (integer threshold) equals the Bernoulli fills' u01f < keep for every
// 24-bit value, and its element index / paired words are those of a
// random_fill of the (B, H, L, S) mask. Built and run by
// tests/test_cuda_attention.py with the host C++ compiler; prints "ok".
#include <cstdio>
#include <cstdlib>
#include <initializer_list>

#include "cuda/attention.h"

using namespace emc_attn;

static int failures = 0;
#define EXPECT(cond, ...)                                                                                   \
    do {                                                                                                    \
        if (!(cond)) {                                                                                      \
            if (failures++ < 20) {                                                                          \
                std::printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
                std::printf(__VA_ARGS__);                                                                   \
                std::printf("\n");                                                                          \
            }                                                                                               \
        }                                                                                                   \
    } while (0)

static void fragments() {
    int a[16][16] = {}, b[16][8] = {}, c[16][8] = {};
    for (int lane = 0; lane < 32; lane++) {
        for (int reg = 0; reg < 4; reg++)
            for (int h = 0; h < 2; h++) a[a_row(lane, reg)][a_col(lane, reg, h)]++;
        for (int reg = 0; reg < 2; reg++)
            for (int h = 0; h < 2; h++) b[b_k(lane, reg, h)][b_n(lane)]++;
        for (int i = 0; i < 4; i++) c[c_row(lane, i)][c_col(lane, i)]++;
        // p's accumulator tiles 2kk (keys 0..7) and 2kk + 1 (keys 8..15) as the A fragment:
        // register r takes tile (r >> 1) elements 2 (r & 1) and 2 (r & 1) + 1
        for (int reg = 0; reg < 4; reg++)
            for (int h = 0; h < 2; h++) {
                int tile = reg >> 1, e = 2 * (reg & 1) + h;
                EXPECT(a_row(lane, reg) == c_row(lane, e), "lane %d reg %d: row", lane, reg);
                EXPECT(a_col(lane, reg, h) == tile * 8 + c_col(lane, e), "lane %d reg %d half %d: col", lane, reg, h);
            }
        // a register holds two neighbouring columns (one 32-bit shared load / pack)
        for (int reg = 0; reg < 4; reg++) EXPECT(a_col(lane, reg, 1) == a_col(lane, reg, 0) + 1, "a pair");
        for (int reg = 0; reg < 2; reg++) EXPECT(b_k(lane, reg, 1) == b_k(lane, reg, 0) + 1, "b pair");
        EXPECT(c_col(lane, 1) == c_col(lane, 0) + 1 && c_row(lane, 1) == c_row(lane, 0), "c pair");
    }
    for (int r = 0; r < 16; r++)
        for (int k = 0; k < 16; k++) EXPECT(a[r][k] == 1, "a[%d][%d] covered %d times", r, k, a[r][k]);
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 8; n++) EXPECT(b[k][n] == 1, "b[%d][%d] covered %d times", k, n, b[k][n]);
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++) EXPECT(c[r][n] == 1, "c[%d][%d] covered %d times", r, n, c[r][n]);
}

// every visible (i, j) pair lies in a processed tile; every skipped tile holds none;
// an unmasked tile holds only visible pairs
static void tiles(long long L, long long S, bool causal) {
    const long long bq = 64, bk = 64;
    for (long long q0 = 0; q0 < L; q0 += bq) {
        long long n = key_tiles(q0, bq, L, S, bk, causal);
        for (long long k0 = 0; k0 < ((S + bk - 1) / bk) * bk; k0 += bk) {
            bool any = false;
            for (long long i = q0; i < q0 + bq && i < L; i++)
                for (long long j = k0; j < k0 + bk && j < S; j++) any |= visible(i, j, S, causal);
            EXPECT(!any || k0 / bk < n, "L %lld S %lld causal %d: tile (%lld, %lld) skipped", L, S, causal, q0, k0);
            if (k0 / bk >= n) continue;
            for (long long w = 0; w < 4; w++) { // the forward's warps: 16 rows each
                long long r0 = q0 + 16 * w;
                if (tile_needs_mask(k0, bk, r0, S, causal)) continue;
                for (long long i = r0; i < r0 + 16; i++)
                    for (long long j = k0; j < k0 + bk; j++)
                        EXPECT(visible(i, j, S, causal), "L %lld S %lld: (%lld, %lld) unmasked", L, S, i, j);
            }
        }
    }
    for (long long bqb : {32LL, 64LL}) // the backward: query tiles before the first one see no key of the tile
        for (long long k0 = 0; k0 < S; k0 += bk) {
            long long first = first_query_tile(k0, bqb, causal) * bqb;
            for (long long i = 0; i < first && i < L; i++)
                for (long long j = k0; j < k0 + bk && j < S; j++)
                    EXPECT(!visible(i, j, S, causal), "bwd: (%lld, %lld) before tile %lld", i, j, first);
        }
}

static void dropout() {
    // the integer keep test against em_philox_u01f(word) < keep, as random_fill's Bernoulli compares
    const double keeps[] = {0.0, 1e-9, 0.1, 0.25, 0.5, 0.7, 0.75, 1 - 1e-9, 1.0, 3.0 / 16777216.0,
                            12345.5 / 16777216.0, 0.9999999403953552};
    for (double keep : keeps) {
        const uint32_t t = keep_threshold(keep);
        int bad = 0;
        for (uint32_t hi = 0; hi < (1u << 24); hi++) {
            const uint32_t w = (hi << 8) | (hi & 0xff);
            bad += drop_keeps(w, t) != ((double)em_philox_u01f(w) < keep);
        }
        EXPECT(bad == 0, "keep %.17g: %d words disagree", keep, bad);
    }
    // element (bh, i, j) is element (bh L + i) S + j of the stream; pairs read the right words
    const long long L = 7, S = 5;
    for (long long bh = 0; bh < 3; bh++)
        for (long long i = 0; i < L; i++)
            for (long long j = 0; j < S; j++) {
                const unsigned long long idx = drop_index(bh, L, S, i, j);
                EXPECT(idx == (unsigned long long)((bh * L + i) * S + j), "index (%lld, %lld, %lld)", bh, i, j);
                uint32_t x0, x1;
                drop_words(42, 9, idx, x0, x1);
                EmPhilox4 a = em_philox_block(42, 9, idx / 4), b = em_philox_block(42, 9, (idx + 1) / 4);
                EXPECT(x0 == a.v[idx % 4] && x1 == b.v[(idx + 1) % 4], "words of %llu", idx);
            }
    // 64-bit indices past 2^32 elements
    const unsigned long long big = drop_index(40000, 4096, 4096, 4095, 4095);
    EXPECT(big == 40000ULL * 4096 * 4096 + 4095ULL * 4096 + 4095, "64-bit index");
}

int main() {
    fragments();
    dropout();
    const long long sizes[] = {1, 2, 15, 16, 17, 63, 64, 65, 100, 128, 129, 200};
    for (long long L : sizes)
        for (long long S : sizes)
            for (int c = 0; c < 2; c++) tiles(L, S, c != 0);
    if (failures) {
        std::printf("%d failures\n", failures);
        return 1;
    }
    std::printf("ok\n");
    return 0;
}
