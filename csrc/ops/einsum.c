/* einsum.c — torch.einsum(equation, operands). The equation is parsed into
 * subscripts per operand; every operand is then viewed with one common dim
 * order (output dims first, then contracted dims): a repeated subscript
 * becomes a diagonal (one dim whose stride is the sum of both), a missing
 * subscript a unit dim. Operands are contracted left to right, each pair
 * as one batched matrix multiply (em_bmm) over permuted and reshaped views;
 * a dim that only one operand still has is summed out first. This is
 * torch's algorithm, so results, dtypes (sums of integers give int64) and
 * error messages agree. The Python front (ember.functional.einsum) accepts
 * varargs and the sublist format and calls this with a list. */
#include "../ember.h"

enum { NLABELS = 52, ELLIPSIS = NLABELS };

extern const EmKernels em_kernels_mul;

static bool is_label(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
/* Uppercase first: the implicit output lists labels in this order. */
static int label_index(unsigned char c) { return c <= 'Z' ? c - 'A' : c - 'a' + 26; }
static char label_char(int s) { return (char)(s < 26 ? 'A' + s : 'a' + s - 26); }

static EmTensor *mul(EmTensor *a, EmTensor *b) {
    EmIterConfig cfg = em_iter_config("mul", &em_kernels_mul, EM_PROMOTE_NONE);
    cfg.inputs[0] = em_opnd(a);
    cfg.inputs[1] = em_opnd(b);
    cfg.ninputs = 2;
    return em_iter_run(&cfg);
}

static EmTensor *sum_one(EmTensor *t, int dim) {
    bool mask[EM_MAX_DIMS] = {false};
    mask[dim] = true;
    return em_linalg_sum(t, mask, true);
}

/* (l * r).sum(dims in sum), keeping the summed dims as size 1; l and r have
 * the same number of dims and broadcast. One bmm:
 *   l -> [lro, lo, sum], r -> [lro, sum, ro] -> [lro, lo, ro] -> permuted back,
 * where lro are dims both have, lo only l, ro only r. */
static EmTensor *sumproduct_pair(EmTensor *l, EmTensor *r, const bool *sum, int nd) {
    bool any = false;
    for (int i = 0; i < nd; i++) any |= sum[i];
    if (!any) return mul(l, r);
    int64_t lro[EM_MAX_DIMS], lo[EM_MAX_DIMS], ro[EM_MAX_DIMS], sd[EM_MAX_DIMS];
    int nlro = 0, nlo = 0, nro = 0, nsd = 0;
    int64_t lro_size = 1, lo_size = 1, ro_size = 1, sum_size = 1;
    EmTensor *L = (EmTensor *)Py_NewRef(l), *R = (EmTensor *)Py_NewRef(r), *res = NULL;
    for (int i = 0; i < nd; i++) {
        bool sl = L->sizes[i] != 1, sr = R->sizes[i] != 1;
        if (sum[i]) {
            if (sl && sr) {
                EM_CHECK(L->sizes[i] == R->sizes[i], PyExc_RuntimeError,
                         "non-broadcast dimensions must match");
                sum_size *= L->sizes[i];
            } else if (sl) {
                Py_SETREF(L, sum_one(L, i));
                EM_TRY(L);
            } else if (sr) {
                Py_SETREF(R, sum_one(R, i));
                EM_TRY(R);
            }
            sd[nsd++] = i;
        } else if (sl && sr) {
            EM_CHECK(L->sizes[i] == R->sizes[i], PyExc_RuntimeError,
                     "non-broadcast dimensions must match");
            lro[nlro++] = i;
            lro_size *= L->sizes[i];
        } else if (sl) {
            lo[nlo++] = i;
            lo_size *= L->sizes[i];
        } else {
            ro[nro++] = i;
            ro_size *= R->sizes[i];
        }
    }
    int64_t lperm[EM_MAX_DIMS], rperm[EM_MAX_DIMS], operm[EM_MAX_DIMS], osize[EM_MAX_DIMS];
    int n = 0;
#define PUT(arr, k, from) memcpy((arr) + n, (from), (k) * sizeof(int64_t)), n += (k)
    PUT(lperm, nlro, lro); PUT(lperm, nlo, lo); PUT(lperm, nsd, sd); PUT(lperm, nro, ro);
    n = 0;
    PUT(rperm, nlro, lro); PUT(rperm, nsd, sd); PUT(rperm, nro, ro); PUT(rperm, nlo, lo);
#undef PUT
    n = 0;
    for (int i = 0; i < nlro; i++) osize[n++] = L->sizes[lro[i]];
    for (int i = 0; i < nlo; i++) osize[n++] = L->sizes[lo[i]];
    for (int i = 0; i < nsd; i++) osize[n++] = 1;
    for (int i = 0; i < nro; i++) osize[n++] = R->sizes[ro[i]];
    for (int i = 0; i < nd; i++) operm[lperm[i]] = i;

    int64_t l3[3] = {lro_size, lo_size, sum_size}, r3[3] = {lro_size, sum_size, ro_size};
    Py_SETREF(L, em_permute(L, nd, lperm));
    EM_TRY(L);
    Py_SETREF(L, em_reshape(L, 3, l3));
    EM_TRY(L);
    Py_SETREF(R, em_permute(R, nd, rperm));
    EM_TRY(R);
    Py_SETREF(R, em_reshape(R, 3, r3));
    EM_TRY(R);
    res = em_bmm(L, R, NULL);
    EM_TRY(res);
    Py_SETREF(res, em_reshape(res, nd, osize));
    EM_TRY(res);
    Py_SETREF(res, em_permute(res, nd, operm));
    EM_TRY(res);
    Py_DECREF(L);
    Py_DECREF(R);
    return res;
fail:
    Py_XDECREF(L);
    Py_XDECREF(R);
    Py_XDECREF(res);
    return NULL;
}

typedef struct {
    int nops;
    EmTensor **in;       /* borrowed operands */
    int8_t *labels;      /* all operands' subscripts, ELLIPSIS for "..." */
    int *start, *count;  /* operand i: labels[start[i] .. start[i] + count[i]) */
    int *nlabels;        /* subscripts other than the ellipsis */
    bool *has_ell;
} Parsed;

static int parse_lhs(const char *lhs, Py_ssize_t len, Parsed *p) {
    int cur = 0, n = 0;
    bool ell = false;
    p->start[0] = 0;
    for (Py_ssize_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)lhs[i];
        if (ch == ' ') continue;
        if (ch == '.') {
            if (ell) {
                PyErr_Format(PyExc_RuntimeError,
                             "einsum(): found '.' for operand %d for which an ellipsis was already found", cur);
                return -1;
            }
            if (!(i + 2 < len && lhs[i + 1] == '.' && lhs[i + 2] == '.')) {
                PyErr_Format(PyExc_RuntimeError,
                             "einsum(): found '.' for operand %d that is not part of any ellipsis", cur);
                return -1;
            }
            i += 2;
            p->labels[n++] = ELLIPSIS;
            ell = true;
            p->has_ell[cur] = true;
        } else if (ch == ',') {
            p->count[cur] = n - p->start[cur];
            if (++cur >= p->nops) {
                PyErr_SetString(PyExc_RuntimeError,
                                "einsum(): fewer operands were provided than specified in the equation");
                return -1;
            }
            p->start[cur] = n;
            ell = false;
        } else if (is_label(ch)) {
            p->labels[n++] = (int8_t)label_index(ch);
            p->nlabels[cur]++;
        } else {
            PyErr_Format(PyExc_RuntimeError,
                         "einsum(): invalid subscript given at index %zd in the equation string, "
                         "subscripts must be in [a-zA-Z]", i);
            return -1;
        }
    }
    p->count[cur] = n - p->start[cur];
    if (cur != p->nops - 1) {
        PyErr_SetString(PyExc_RuntimeError,
                        "einsum(): more operands were provided than specified in the equation");
        return -1;
    }
    return 0;
}

/* Operand i viewed in the common dim order [nperm dims]. */
static EmTensor *align_operand(const Parsed *p, int i, const int *perm_index, int ell_index,
                               int ell_num_dim, int nperm, int64_t *label_size, int64_t *ell_sizes,
                               int64_t *dim_counts) {
    EmTensor *x = p->in[i];
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS], fs[EM_MAX_DIMS], ft[EM_MAX_DIMS];
    int permutation[EM_MAX_DIMS];
    int nd = x->ndim, dim = 0;
    memcpy(sizes, x->sizes, nd * sizeof(int64_t));
    memcpy(strides, x->strides, nd * sizeof(int64_t));
    for (int j = 0; j < nperm; j++) permutation[j] = -1;
    for (int q = 0; q < p->count[i]; q++) {
        int s = p->labels[p->start[i] + q];
        if (s == ELLIPSIS) {
            int covered = x->ndim - p->nlabels[i];
            for (int j = ell_num_dim - covered; j < ell_num_dim; j++) {
                if (sizes[dim] != 1) {
                    if (ell_sizes[j] != 1 && ell_sizes[j] != sizes[dim]) {
                        PyErr_Format(PyExc_RuntimeError,
                                     "einsum(): dimension %d covered by ellipsis in operand %dhas size "
                                     "%lld which does not broadcast with previously seen ellipsis with "
                                     "size %lld for the respective dimension",
                                     dim, i, (long long)sizes[dim], (long long)ell_sizes[j]);
                        return NULL;
                    }
                    ell_sizes[j] = sizes[dim];
                    dim_counts[ell_index + j]++;
                }
                permutation[ell_index + j] = dim++;
            }
        } else if (permutation[perm_index[s]] == -1) {
            if (sizes[dim] != 1) {
                if (label_size[s] != 1 && label_size[s] != sizes[dim]) {
                    PyErr_Format(PyExc_RuntimeError,
                                 "einsum(): subscript %c has size %lld for operand %d which does not "
                                 "broadcast with previously seen size %lld",
                                 label_char(s), (long long)sizes[dim], i, (long long)label_size[s]);
                    return NULL;
                }
                label_size[s] = sizes[dim];
                dim_counts[perm_index[s]]++;
            }
            permutation[perm_index[s]] = dim++;
        } else { /* repeated subscript: the diagonal, kept where the first one was */
            int prev = permutation[perm_index[s]];
            if (sizes[dim] != sizes[prev]) {
                PyErr_Format(PyExc_RuntimeError,
                             "einsum(): subscript %c is repeated for operand %d but the sizes don't "
                             "match, %lld != %lld", label_char(s), i, (long long)sizes[dim],
                             (long long)sizes[prev]);
                return NULL;
            }
            strides[prev] += strides[dim];
            for (int d = dim; d + 1 < nd; d++) {
                sizes[d] = sizes[d + 1];
                strides[d] = strides[d + 1];
            }
            nd--;
        }
    }
    for (int j = 0; j < nperm; j++) {
        if (permutation[j] == -1) { /* a unit dim for a subscript this operand lacks */
            sizes[nd] = 1;
            strides[nd] = 0;
            permutation[j] = nd++;
        }
    }
    for (int j = 0; j < nperm; j++) {
        fs[j] = sizes[permutation[j]];
        ft[j] = strides[permutation[j]];
    }
    return em_view_of(x, nperm, fs, ft, x->offset);
}

static PyObject *einsum(const char *eq, Py_ssize_t eqlen, Parsed *p) {
    EmTensor **ops = NULL, *cur = NULL;
    PyObject *result = NULL;
    const char *arrow = strstr(eq, "->");
    Py_ssize_t lhs_len = arrow ? arrow - eq : eqlen;
    EM_TRY(parse_lhs(eq, lhs_len, p) == 0);

    int64_t label_count[NLABELS] = {0};
    int ell_num_dim = 0;
    for (int i = 0; i < p->nops; i++) {
        int nd = p->in[i]->ndim;
        for (int q = 0; q < p->count[i]; q++) {
            int s = p->labels[p->start[i] + q];
            if (s != ELLIPSIS) label_count[s]++;
        }
        if (p->has_ell[i]) {
            EM_CHECK(p->nlabels[i] <= nd, PyExc_RuntimeError,
                     "einsum(): the number of subscripts in the equation (%d) is more than the number "
                     "of dimensions (%d) for operand %d", p->nlabels[i], nd, i);
            if (nd - p->nlabels[i] > ell_num_dim) ell_num_dim = nd - p->nlabels[i];
        } else {
            EM_CHECK(p->nlabels[i] == nd, PyExc_RuntimeError,
                     "einsum(): the number of subscripts in the equation (%d) does not match the "
                     "number of dimensions (%d) for operand %d and no ellipsis was given",
                     p->nlabels[i], nd, i);
        }
    }

    /* the common dim order: output dims, then the contracted ones */
    int perm_index[NLABELS], nperm = 0, ell_index = 0;
    bool ell_in_output = false;
    for (int s = 0; s < NLABELS; s++) perm_index[s] = -1;
    if (!arrow) { /* implicit output: the ellipsis, then subscripts seen once, sorted */
        nperm = ell_num_dim;
        ell_in_output = true;
        for (int s = 0; s < NLABELS; s++)
            if (label_count[s] == 1) perm_index[s] = nperm++;
    } else {
        const char *rhs = arrow + 2;
        Py_ssize_t rlen = eqlen - lhs_len - 2;
        for (Py_ssize_t i = 0; i < rlen; i++) {
            unsigned char ch = (unsigned char)rhs[i];
            if (ch == ' ') continue;
            if (ch == '.') {
                EM_CHECK(!ell_in_output, PyExc_RuntimeError,
                         "einsum(): found '.' for output but an ellipsis (...) was already found");
                EM_CHECK(i + 2 < rlen && rhs[i + 1] == '.' && rhs[i + 2] == '.', PyExc_RuntimeError,
                         "einsum(): found '.' for output that is not part of any ellipsis (...)");
                i += 2;
                ell_index = nperm;
                nperm += ell_num_dim;
                ell_in_output = true;
                continue;
            }
            EM_CHECK(is_label(ch), PyExc_RuntimeError,
                     "einsum(): invalid subscript given at index %zd in the equation string, "
                     "subscripts must be in [a-zA-Z]", lhs_len + 2 + i);
            int s = label_index(ch);
            EM_CHECK(label_count[s] > 0 && perm_index[s] == -1, PyExc_RuntimeError,
                     "einsum(): output subscript %c%s", ch,
                     perm_index[s] > -1 ? " appears more than once in the output"
                                        : " does not appear in the equation for any input operand");
            perm_index[s] = nperm++;
        }
    }
    const int out_num_dim = nperm;
    if (!ell_in_output) {
        ell_index = nperm;
        nperm += ell_num_dim;
    }
    for (int s = 0; s < NLABELS; s++)
        if (label_count[s] > 0 && perm_index[s] == -1) perm_index[s] = nperm++;
    EM_CHECK(nperm <= EM_MAX_DIMS, PyExc_RuntimeError,
             "einsum(): the equation needs %d dimensions, more than the %d a tensor can have", nperm,
             EM_MAX_DIMS);

    int64_t label_size[NLABELS], ell_sizes[EM_MAX_DIMS], dim_counts[EM_MAX_DIMS] = {0};
    for (int s = 0; s < NLABELS; s++) label_size[s] = 1;
    for (int j = 0; j < EM_MAX_DIMS; j++) ell_sizes[j] = 1;
    ops = PyMem_Calloc(p->nops, sizeof(EmTensor *));
    if (!ops) {
        PyErr_NoMemory();
        goto fail;
    }
    for (int i = 0; i < p->nops; i++) {
        ops[i] = align_operand(p, i, perm_index, ell_index, ell_num_dim, nperm, label_size,
                               ell_sizes, dim_counts);
        EM_TRY(ops[i]);
    }

    /* contract left to right */
    cur = ops[0];
    ops[0] = NULL;
    for (int i = 1; i < p->nops; i++) {
        EmTensor *b = ops[i];
        bool sum[EM_MAX_DIMS] = {false}, asum[EM_MAX_DIMS] = {false}, bsum[EM_MAX_DIMS] = {false};
        bool any_a = false, any_b = false;
        for (int d = out_num_dim; d < nperm; d++) {
            if (cur->sizes[d] != 1 && b->sizes[d] != 1) {
                if (--dim_counts[d] == 1) {
                    sum[d] = true;
                    dim_counts[d] = 0;
                }
            } else if (dim_counts[d] == 1) {
                if (cur->sizes[d] != 1) {
                    asum[d] = any_a = true;
                    dim_counts[d] = 0;
                } else if (b->sizes[d] != 1) {
                    bsum[d] = any_b = true;
                    dim_counts[d] = 0;
                }
            }
        }
        if (any_a) {
            Py_SETREF(cur, em_linalg_sum(cur, asum, true));
            EM_TRY(cur);
        }
        if (any_b) {
            Py_SETREF(ops[i], em_linalg_sum(b, bsum, true));
            EM_TRY(ops[i]);
        }
        Py_SETREF(cur, sumproduct_pair(cur, ops[i], sum, nperm));
        EM_TRY(cur);
    }

    if (nperm > out_num_dim) {
        if (p->nops > 1) { /* every contracted dim is size 1 by now: drop them */
            for (int d = out_num_dim; d < nperm; d++)
                EM_CHECK(cur->sizes[d] == 1, PyExc_RuntimeError, "einsum(): internal error (dim %d)", d);
            Py_SETREF(cur, em_view_of(cur, out_num_dim, cur->sizes, cur->strides, cur->offset));
        } else {
            bool mask[EM_MAX_DIMS] = {false};
            for (int d = out_num_dim; d < nperm; d++) mask[d] = true;
            Py_SETREF(cur, em_linalg_sum(cur, mask, false));
        }
        EM_TRY(cur);
    }
    result = (PyObject *)cur;
    cur = NULL;
fail:
    Py_XDECREF(cur);
    if (ops) {
        for (int i = 0; i < p->nops; i++) Py_XDECREF(ops[i]);
        PyMem_Free(ops);
    }
    return result;
}

PyObject *em_impl_einsum(EmCall *c) {
    Py_ssize_t eqlen;
    const char *eq = PyUnicode_AsUTF8AndSize(c->args[0], &eqlen);
    if (!eq) return NULL;
    PyObject *obj = c->args[1];
    if (!PyList_Check(obj) && !PyTuple_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "einsum(): argument 'operands' must be tuple of Tensors, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    PyObject *seq = PySequence_Fast(obj, "einsum(): operands must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *result = NULL;
    Parsed p = {0};
    if (n == 0) {
        PyErr_SetString(PyExc_RuntimeError, "einsum(): must provide at least one operand");
        goto done;
    }
    if (n > INT32_MAX / 2) {
        PyErr_SetString(PyExc_RuntimeError, "einsum(): too many operands");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_ITEMS(seq)[i];
        if (!em_is_tensor(o)) {
            PyErr_Format(PyExc_TypeError, "expected Tensor as element %zd in argument 1, but got %.100s",
                         i, Py_TYPE(o)->tp_name);
            goto done;
        }
        if (!em_is_meta((EmTensor *)o) && em_check_cpu((EmTensor *)o, "einsum") < 0) goto done;
    }
    p.nops = (int)n;
    p.in = (EmTensor **)PySequence_Fast_ITEMS(seq);
    p.labels = PyMem_Malloc(eqlen + 1);
    p.start = PyMem_Calloc(n, sizeof(int));
    p.count = PyMem_Calloc(n, sizeof(int));
    p.nlabels = PyMem_Calloc(n, sizeof(int));
    p.has_ell = PyMem_Calloc(n, sizeof(bool));
    if (!p.labels || !p.start || !p.count || !p.nlabels || !p.has_ell) {
        PyErr_NoMemory();
        goto done;
    }
    result = einsum(eq, eqlen, &p);
done:
    PyMem_Free(p.labels);
    PyMem_Free(p.start);
    PyMem_Free(p.count);
    PyMem_Free(p.nlabels);
    PyMem_Free(p.has_ell);
    Py_DECREF(seq);
    return result;
}
