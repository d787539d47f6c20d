/* attention_tmpl.h — the attention kernels for one element type, included
 * by cpu/attention.c with T (float or double), SUF (f32 / f64), EXP_ROWS
 * (x = exp(x - m) over a row, returning the sum) and ROW_STEP (one row's
 * online-softmax step) defined. */

#define AT_CAT_(a, b) a##_##b
#define AT_CAT(a, b) AT_CAT_(a, b)
#define FN(name) AT_CAT(name, SUF)

/* Row i of a score block (n keys from j0) gets the mask; returns how many
 * of its leading keys the causal cut leaves (n without one): the caller
 * works on those only and zeroes the rest. */
static int64_t FN(mask_row)(const EmAttn *p, T *row, int64_t n, int64_t b, int64_t h, int64_t i, int64_t j0) {
    int64_t nv = n;
    if (p->causal) nv = i - j0 + 1 < n ? (i - j0 + 1 > 0 ? i - j0 + 1 : 0) : n;
    if (p->mask) {
        int64_t off = b * p->ms[0] + h * p->ms[1] + i * p->ms[2] + j0 * p->ms[3], s = p->ms[3];
        if (p->mask_bool) {
            const uint8_t *mk = (const uint8_t *)p->mask + off;
            for (int64_t c = 0; c < nv; c++)
                if (!mk[c * s]) row[c] = -INFINITY;
        } else if (s == 1) {
            const T *mk = (const T *)p->mask + off;
            for (int64_t c = 0; c < nv; c++) row[c] += mk[c];
        } else {
            const T *mk = (const T *)p->mask + off;
            for (int64_t c = 0; c < nv; c++) row[c] += mk[c * s];
        }
    }
    return nv;
}

/* One (batch, head, query block): rows i0 .. i0 + m - 1. Work buffers:
 * s (bq x bk scores / probabilities), acc (bq x Dv), mx and sm (bq). */
AT_CLONES static void FN(forward_block)(const EmAttn *p, int64_t b, int64_t h, int64_t i0, int64_t m, int64_t bk, T *s,
                              T *acc, T *mx, T *sm, T *out, T *lse) {
    const int64_t D = p->D, Dv = p->Dv, hk = h / (p->H / p->Hk);
    const T *qp = (const T *)p->q.data + b * p->q.sb + h * p->q.sh + i0 * p->q.sr;
    const T *kp = (const T *)p->k.data + b * p->k.sb + hk * p->k.sh;
    const T *vp = (const T *)p->v.data + b * p->v.sb + hk * p->v.sh;
    const EmScalar scale = {'f', {.f = p->scale}}, one = {'f', {.f = 1.0}}, zero = {'f', {.f = 0.0}};
    for (int64_t r = 0; r < m; r++) mx[r] = -INFINITY, sm[r] = 0;
    memset(acc, 0, (size_t)(m * Dv) * sizeof(T));
    const int64_t kend = p->causal ? (i0 + m < p->S ? i0 + m : p->S) : p->S;
    for (int64_t j0 = 0; j0 < kend; j0 += bk) {
        const int64_t n = bk < kend - j0 ? bk : kend - j0;
        em_gemm_ex(p->dt, false, true, m, n, D, qp, p->q.sr, kp + j0 * p->k.sr, p->k.sr, s, n, scale, zero, false);
        for (int64_t r = 0; r < m; r++) {
            T *row = s + r * n;
            const int64_t nv = FN(mask_row)(p, row, n, b, h, i0 + r, j0);
            if (nv < n) memset(row + nv, 0, (size_t)(n - nv) * sizeof(T)); /* causally cut: p = 0 */
            T alpha = ROW_STEP(row, nv, mx + r, sm + r);
            if (alpha != 1) {
                T *a = acc + r * Dv;
                for (int64_t d = 0; d < Dv; d++) a[d] *= alpha;
            }
        }
        if (Dv > 0)
            em_gemm_ex(p->dt, false, false, m, Dv, n, s, n, vp + j0 * p->v.sr, p->v.sr, acc, Dv, one, one, false);
    }
    int64_t os[3];
    em_attn_strides(p->out_st, p->H, p->L, Dv, os);
    T *o = out + b * os[0] + h * os[1] + i0 * os[2], *l = lse + (b * p->H + h) * p->L + i0;
    for (int64_t r = 0; r < m; r++) {
        /* a row where nothing takes part (sum 0): acc * 0, so zeros (NaN where v holds NaN or inf), and
         * lse 0, as torch's CPU kernel gives; a NaN sum (NaN scores) makes the row NaN */
        const T inv = sm[r] != 0 ? 1 / sm[r] : 0;
        for (int64_t d = 0; d < Dv; d++) o[r * os[2] + d] = acc[r * Dv + d] * inv;
        l[r] = sm[r] != 0 ? mx[r] + (T)log((double)sm[r]) : 0;
    }
}

static int FN(attention_forward)(const EmAttn *p, T *out, T *lse) {
    int64_t bq, bk;
    block_sizes(p, &bq, &bk);
    const int64_t nqb = (p->L + bq - 1) / bq, tasks = p->B * p->H * nqb;
    if (tasks == 0) return 0;
    const int nt = thread_count(p, tasks);
    const int64_t per = bq * (bk > 0 ? bk : 1) + bq * p->Dv + 2 * bq;
    T *work = malloc((size_t)nt * (size_t)per * sizeof(T));
    if (!work) return -1;
    OMP_PARALLEL
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        T *s = work + (int64_t)tid * per, *acc = s + bq * (bk > 0 ? bk : 1), *mx = acc + bq * p->Dv, *sm = mx + bq;
        OMP_FOR_DYNAMIC
        for (int64_t t = 0; t < tasks; t++) {
            int64_t qb = t % nqb, bh = t / nqb, i0 = qb * bq;
            int64_t m = bq < p->L - i0 ? bq : p->L - i0;
            FN(forward_block)(p, bh / p->H, bh % p->H, i0, m, bk, s, acc, mx, sm, out, lse);
        }
    }
    free(work);
    return 0;
}

/* ---- backward pieces, for query rows i0 .. i0 + m - 1 of (b, h) against
 * keys j0 .. j0 + n - 1 (buffers pb and dp: m x n) */

#define AT_Q(p, b, h, i) ((const T *)(p)->q.data + (b) * (p)->q.sb + (h) * (p)->q.sh + (i) * (p)->q.sr)
#define AT_K(p, b, hk, j) ((const T *)(p)->k.data + (b) * (p)->k.sb + (hk) * (p)->k.sh + (j) * (p)->k.sr)
#define AT_V(p, b, hk, j) ((const T *)(p)->v.data + (b) * (p)->v.sb + (hk) * (p)->v.sh + (j) * (p)->v.sr)
#define AT_G(go, b, h, i) ((const T *)(go)->data + (b) * (go)->sb + (h) * (go)->sh + (i) * (go)->sr)

/* di = rowsum(dO o O) */
static void FN(row_dots)(const EmAttn *p, const EmAttnOperand *go, const EmAttnOperand *o, int64_t b, int64_t h,
                         int64_t i0, int64_t m, T *di) {
    for (int64_t r = 0; r < m; r++) {
        const T *g = AT_G(go, b, h, i0 + r), *y = AT_G(o, b, h, i0 + r);
        T acc = 0;
        SIMD_SUM(acc)
        for (int64_t d = 0; d < p->Dv; d++) acc += g[d] * y[d];
        di[r] = acc;
    }
}

/* pb = p = exp(scale q k^T + mask - lse) */
static void FN(probs_block)(const EmAttn *p, const T *lse, int64_t b, int64_t h, int64_t i0, int64_t m, int64_t j0,
                            int64_t n, T *pb) {
    const int64_t hk = h / (p->H / p->Hk);
    const EmScalar scale = {'f', {.f = p->scale}}, zero = {'f', {.f = 0.0}};
    const T *lp = lse + (b * p->H + h) * p->L + i0;
    em_gemm_ex(p->dt, false, true, m, n, p->D, AT_Q(p, b, h, i0), p->q.sr, AT_K(p, b, hk, j0), p->k.sr, pb, n, scale,
               zero, false);
    for (int64_t r = 0; r < m; r++) {
        T *row = pb + r * n;
        const int64_t nv = FN(mask_row)(p, row, n, b, h, i0 + r, j0);
        EXP_ROWS(row, nv, lp[r], false);
        if (nv < n) memset(row + nv, 0, (size_t)(n - nv) * sizeof(T));
    }
}

/* dv[j0 ..] += p^T dO (before pb turns into ds) */
static void FN(dv_block)(const EmAttn *p, const EmAttnOperand *go, int64_t b, int64_t h, int64_t i0, int64_t m,
                         int64_t j0, int64_t n, const T *pb, T *dv) {
    const int64_t hk = h / (p->H / p->Hk), Dv = p->Dv;
    const EmScalar one = {'f', {.f = 1.0}};
    int64_t st[3];
    em_attn_strides(p->dv_st, p->Hk, p->S, Dv, st);
    if (Dv > 0)
        em_gemm_ex(p->dt, true, false, n, Dv, m, pb, n, AT_G(go, b, h, i0), go->sr,
                   dv + b * st[0] + hk * st[1] + j0 * st[2], st[2], one, one, false);
}

/* pb: p -> ds = p o (dp - di) with dp = dO v^T */
static void FN(dscores_block)(const EmAttn *p, const EmAttnOperand *go, int64_t b, int64_t h, int64_t i0, int64_t m,
                              int64_t j0, int64_t n, const T *di, T *pb, T *dp) {
    const int64_t hk = h / (p->H / p->Hk);
    const EmScalar one = {'f', {.f = 1.0}}, zero = {'f', {.f = 0.0}};
    if (p->Dv > 0)
        em_gemm_ex(p->dt, false, true, m, n, p->Dv, AT_G(go, b, h, i0), go->sr, AT_V(p, b, hk, j0), p->v.sr, dp, n, one,
                   zero, false);
    else
        memset(dp, 0, (size_t)(m * n) * sizeof(T));
    for (int64_t r = 0; r < m; r++) {
        T *row = pb + r * n;
        const T *dr = dp + r * n, dir = di[r];
        for (int64_t c = 0; c < n; c++) row[c] *= dr[c] - dir;
    }
}

/* dq[i0 ..] += scale ds k */
static void FN(dq_block)(const EmAttn *p, int64_t b, int64_t h, int64_t i0, int64_t m, int64_t j0, int64_t n,
                         const T *pb, T *dq) {
    const int64_t hk = h / (p->H / p->Hk), D = p->D;
    const EmScalar scale = {'f', {.f = p->scale}}, one = {'f', {.f = 1.0}};
    int64_t st[3];
    em_attn_strides(p->dq_st, p->H, p->L, D, st);
    if (D > 0)
        em_gemm_ex(p->dt, false, false, m, D, n, pb, n, AT_K(p, b, hk, j0), p->k.sr, dq + b * st[0] + h * st[1] + i0 * st[2],
                   st[2], scale, one, false);
}

/* dk[j0 ..] += scale ds^T q */
static void FN(dk_block)(const EmAttn *p, int64_t b, int64_t h, int64_t i0, int64_t m, int64_t j0, int64_t n,
                         const T *pb, T *dk) {
    const int64_t hk = h / (p->H / p->Hk), D = p->D;
    const EmScalar scale = {'f', {.f = p->scale}}, one = {'f', {.f = 1.0}};
    int64_t st[3];
    em_attn_strides(p->dk_st, p->Hk, p->S, D, st);
    if (D > 0)
        em_gemm_ex(p->dt, true, false, n, D, m, pb, n, AT_Q(p, b, h, i0), p->q.sr, dk + b * st[0] + hk * st[1] + j0 * st[2],
                   st[2], scale, one, false);
}

/* One pass: a task owns a (batch, key/value head) pair and every query
 * head of its group, so no two tasks write one dk / dv row. */
AT_CLONES static void FN(backward_head)(const EmAttn *p, const EmAttnOperand *go, const EmAttnOperand *o,
                                        const T *lse, int64_t b, int64_t hk, int64_t bq, int64_t bk, T *pb, T *dp,
                                        T *di, T *dq, T *dk, T *dv) {
    const int64_t group = p->H / p->Hk;
    for (int64_t h = hk * group; h < (hk + 1) * group; h++)
        for (int64_t i0 = 0; i0 < p->L; i0 += bq) {
            const int64_t m = bq < p->L - i0 ? bq : p->L - i0;
            const int64_t kend = p->causal ? (i0 + m < p->S ? i0 + m : p->S) : p->S;
            FN(row_dots)(p, go, o, b, h, i0, m, di);
            for (int64_t j0 = 0; j0 < kend; j0 += bk) {
                const int64_t n = bk < kend - j0 ? bk : kend - j0;
                FN(probs_block)(p, lse, b, h, i0, m, j0, n, pb);
                FN(dv_block)(p, go, b, h, i0, m, j0, n, pb, dv);
                FN(dscores_block)(p, go, b, h, i0, m, j0, n, di, pb, dp);
                FN(dq_block)(p, b, h, i0, m, j0, n, pb, dq);
                FN(dk_block)(p, b, h, i0, m, j0, n, pb, dk);
            }
        }
}

/* Two passes, when there are fewer (batch, key/value head) pairs than
 * threads: dq by (batch, head, query block), then dk and dv by (batch,
 * key/value head, key block); p and ds are computed twice, but every
 * thread has work. Pass 1 also leaves every row's di in di_all. */
AT_CLONES static void FN(backward_dq_task)(const EmAttn *p, const EmAttnOperand *go, const EmAttnOperand *o,
                                           const T *lse, int64_t b, int64_t h, int64_t i0, int64_t m, int64_t bk,
                                           T *pb, T *dp, T *di_all, T *dq) {
    T *di = di_all + (b * p->H + h) * p->L + i0;
    const int64_t kend = p->causal ? (i0 + m < p->S ? i0 + m : p->S) : p->S;
    FN(row_dots)(p, go, o, b, h, i0, m, di);
    for (int64_t j0 = 0; j0 < kend; j0 += bk) {
        const int64_t n = bk < kend - j0 ? bk : kend - j0;
        FN(probs_block)(p, lse, b, h, i0, m, j0, n, pb);
        FN(dscores_block)(p, go, b, h, i0, m, j0, n, di, pb, dp);
        FN(dq_block)(p, b, h, i0, m, j0, n, pb, dq);
    }
}

AT_CLONES static void FN(backward_dkv_task)(const EmAttn *p, const EmAttnOperand *go, const T *lse, int64_t b,
                                            int64_t hk, int64_t j0, int64_t n, int64_t bq, T *pb, T *dp,
                                            const T *di_all, T *dk, T *dv) {
    const int64_t group = p->H / p->Hk;
    for (int64_t h = hk * group; h < (hk + 1) * group; h++) /* causal: rows before j0 see none of these keys */
        for (int64_t i0 = p->causal ? j0 / bq * bq : 0; i0 < p->L; i0 += bq) {
            const int64_t m = bq < p->L - i0 ? bq : p->L - i0;
            FN(probs_block)(p, lse, b, h, i0, m, j0, n, pb);
            FN(dv_block)(p, go, b, h, i0, m, j0, n, pb, dv);
            FN(dscores_block)(p, go, b, h, i0, m, j0, n, di_all + (b * p->H + h) * p->L + i0, pb, dp);
            FN(dk_block)(p, b, h, i0, m, j0, n, pb, dk);
        }
}

static int FN(attention_backward)(const EmAttn *p, const EmAttnOperand *go, const EmAttnOperand *o, const T *lse,
                                  T *dq, T *dk, T *dv) {
    int64_t bq, bk;
    block_sizes(p, &bq, &bk);
    const int64_t nqb = (p->L + bq - 1) / bq, nkb = bk > 0 ? (p->S + bk - 1) / bk : 0, heads = p->B * p->Hk;
    if (heads == 0 || nqb == 0 || p->H == 0) return 0;
    const int nt = thread_count(p, p->B * p->H * nqb);
    const bool split = heads < nt && nkb > 0;
    const int64_t bkk = bk > 0 ? bk : 1, per = 2 * bq * bkk + bq;
    T *work = malloc((size_t)nt * (size_t)per * sizeof(T));
    T *di_all = split ? malloc((size_t)(p->B * p->H * p->L) * sizeof(T)) : NULL;
    if (!work || (split && !di_all)) {
        free(work);
        free(di_all);
        return -1;
    }
    OMP_PARALLEL
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        T *pb = work + (int64_t)tid * per, *dp = pb + bq * bkk, *di = dp + bq * bkk;
        if (!split) {
            OMP_FOR_DYNAMIC
            for (int64_t t = 0; t < heads; t++)
                FN(backward_head)(p, go, o, lse, t / p->Hk, t % p->Hk, bq, bk, pb, dp, di, dq, dk, dv);
        } else {
            OMP_FOR_DYNAMIC
            for (int64_t t = 0; t < p->B * p->H * nqb; t++) {
                const int64_t bh = t / nqb, i0 = t % nqb * bq, m = bq < p->L - i0 ? bq : p->L - i0;
                FN(backward_dq_task)(p, go, o, lse, bh / p->H, bh % p->H, i0, m, bk, pb, dp, di_all, dq);
            } /* (the implicit barrier: every di is in di_all) */
            OMP_FOR_DYNAMIC
            for (int64_t t = 0; t < heads * nkb; t++) {
                const int64_t bhk = t / nkb, j0 = t % nkb * bk, n = bk < p->S - j0 ? bk : p->S - j0;
                FN(backward_dkv_task)(p, go, lse, bhk / p->Hk, bhk % p->Hk, j0, n, bq, pb, dp, di_all, dk, dv);
            }
        }
    }
    free(work);
    free(di_all);
    return 0;
}

#undef AT_Q
#undef AT_K
#undef AT_V
#undef AT_G
#undef FN
#undef AT_CAT
#undef AT_CAT_
