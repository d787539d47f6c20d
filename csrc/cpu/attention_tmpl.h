/* attention_tmpl.h — the attention kernels for one element type, included
 * by cpu/attention.c with T (float or double), SUF (f32 / f64) and
 * EXP_ROWS (x = exp(x - m) over a row, returning the sum) defined. */

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
static void FN(forward_block)(const EmAttn *p, int64_t b, int64_t h, int64_t i0, int64_t m, int64_t bk, T *s,
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
            T bm = -INFINITY;
            SIMD_MAX(bm)
            for (int64_t c = 0; c < nv; c++) bm = row[c] > bm ? row[c] : bm;
            T nm = bm > mx[r] ? bm : mx[r];
            if (nm == -INFINITY) { /* nothing in this row takes part yet */
                memset(row, 0, (size_t)nv * sizeof(T));
                continue;
            }
            T alpha = (T)exp((double)(mx[r] - nm)); /* 0 when mx was -inf */
            T sum = EXP_ROWS(row, nv, nm, true);
            sm[r] = sm[r] * alpha + sum;
            if (alpha != 1) {
                T *a = acc + r * Dv;
                for (int64_t d = 0; d < Dv; d++) a[d] *= alpha;
            }
            mx[r] = nm;
        }
        if (Dv > 0)
            em_gemm_ex(p->dt, false, false, m, Dv, n, s, n, vp + j0 * p->v.sr, p->v.sr, acc, Dv, one, one, false);
    }
    T *o = out + ((b * p->H + h) * p->L + i0) * Dv, *l = lse + (b * p->H + h) * p->L + i0;
    for (int64_t r = 0; r < m; r++) {
        if (sm[r] > 0) {
            T inv = 1 / sm[r];
            for (int64_t d = 0; d < Dv; d++) o[r * Dv + d] = acc[r * Dv + d] * inv;
            l[r] = mx[r] + (T)log((double)sm[r]);
        } else { /* a row where nothing takes part: zeros, lse 0 (torch's CPU kernel) */
            for (int64_t d = 0; d < Dv; d++) o[r * Dv + d] = 0;
            l[r] = 0;
        }
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

/* One (batch, query head, query block) against every key block it sees,
 * adding into dq (its rows), dk and dv (the key/value head's). Work
 * buffers: pb and dp (bq x bk), di (bq). */
static void FN(backward_block)(const EmAttn *p, const EmAttnOperand *go, const EmAttnOperand *o, const T *lse,
                               int64_t b, int64_t h, int64_t i0, int64_t m, int64_t bk, T *pb, T *dp, T *di,
                               T *dq, T *dk, T *dv) {
    const int64_t D = p->D, Dv = p->Dv, hk = h / (p->H / p->Hk);
    const T *qp = (const T *)p->q.data + b * p->q.sb + h * p->q.sh + i0 * p->q.sr;
    const T *kp = (const T *)p->k.data + b * p->k.sb + hk * p->k.sh;
    const T *vp = (const T *)p->v.data + b * p->v.sb + hk * p->v.sh;
    const T *gp = (const T *)go->data + b * go->sb + h * go->sh + i0 * go->sr;
    const T *op = (const T *)o->data + b * o->sb + h * o->sh + i0 * o->sr;
    const T *lp = lse + (b * p->H + h) * p->L + i0;
    T *dqp = dq + ((b * p->H + h) * p->L + i0) * D;
    T *dkp = dk + (b * p->Hk + hk) * p->S * D, *dvp = dv + (b * p->Hk + hk) * p->S * Dv;
    const EmScalar scale = {'f', {.f = p->scale}}, one = {'f', {.f = 1.0}}, zero = {'f', {.f = 0.0}};
    for (int64_t r = 0; r < m; r++) { /* Di = rowsum(dO o O) */
        const T *g = gp + r * go->sr, *y = op + r * o->sr;
        T acc = 0;
        SIMD_SUM(acc)
        for (int64_t d = 0; d < Dv; d++) acc += g[d] * y[d];
        di[r] = acc;
    }
    const int64_t kend = p->causal ? (i0 + m < p->S ? i0 + m : p->S) : p->S;
    for (int64_t j0 = 0; j0 < kend; j0 += bk) {
        const int64_t n = bk < kend - j0 ? bk : kend - j0;
        em_gemm_ex(p->dt, false, true, m, n, D, qp, p->q.sr, kp + j0 * p->k.sr, p->k.sr, pb, n, scale, zero, false);
        for (int64_t r = 0; r < m; r++) {
            T *row = pb + r * n;
            const int64_t nv = FN(mask_row)(p, row, n, b, h, i0 + r, j0);
            EXP_ROWS(row, nv, lp[r], false); /* p = exp(s - lse) */
            if (nv < n) memset(row + nv, 0, (size_t)(n - nv) * sizeof(T));
        }
        if (Dv > 0) {
            /* dv += p^T dO;  dp = dO v^T */
            em_gemm_ex(p->dt, true, false, n, Dv, m, pb, n, gp, go->sr, dvp + j0 * Dv, Dv, one, one, false);
            em_gemm_ex(p->dt, false, true, m, n, Dv, gp, go->sr, vp + j0 * p->v.sr, p->v.sr, dp, n, one, zero, false);
        } else {
            memset(dp, 0, (size_t)(m * n) * sizeof(T));
        }
        for (int64_t r = 0; r < m; r++) { /* ds = p o (dp - Di), in place of p */
            T *row = pb + r * n;
            const T *dr = dp + r * n, dir = di[r];
            for (int64_t c = 0; c < n; c++) row[c] *= dr[c] - dir;
        }
        if (D > 0) {
            /* dq += scale ds k;  dk += scale ds^T q */
            em_gemm_ex(p->dt, false, false, m, D, n, pb, n, kp + j0 * p->k.sr, p->k.sr, dqp, D, scale, one, false);
            em_gemm_ex(p->dt, true, false, n, D, m, pb, n, qp, p->q.sr, dkp + j0 * D, D, scale, one, false);
        }
    }
}

static int FN(attention_backward)(const EmAttn *p, const EmAttnOperand *go, const EmAttnOperand *o, const T *lse,
                                  T *dq, T *dk, T *dv) {
    int64_t bq, bk;
    block_sizes(p, &bq, &bk);
    const int64_t nqb = (p->L + bq - 1) / bq, group = p->H / p->Hk, tasks = p->B * p->Hk;
    if (tasks == 0 || nqb == 0) return 0;
    const int nt = thread_count(p, tasks);
    const int64_t bkk = bk > 0 ? bk : 1, per = 2 * bq * bkk + bq;
    T *work = malloc((size_t)nt * (size_t)per * sizeof(T));
    if (!work) return -1;
    OMP_PARALLEL
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        T *pb = work + (int64_t)tid * per, *dp = pb + bq * bkk, *di = dp + bq * bkk;
        OMP_FOR_DYNAMIC
        for (int64_t t = 0; t < tasks; t++) { /* a task owns (b, hk): no two tasks write one dk / dv */
            int64_t b = t / p->Hk, hk = t % p->Hk;
            for (int64_t h = hk * group; h < (hk + 1) * group; h++)
                for (int64_t i0 = 0; i0 < p->L; i0 += bq) {
                    int64_t m = bq < p->L - i0 ? bq : p->L - i0;
                    FN(backward_block)(p, go, o, lse, b, h, i0, m, bk, pb, dp, di, dq, dk, dv);
                }
        }
    }
    free(work);
    return 0;
}

#undef FN
#undef AT_CAT
#undef AT_CAT_
