/* derivatives_attn.c — the backward of the fused CPU attention
 * (ops/attention.c) and of torch's CUDA flash op: one call of its fused backward op, which recomputes
 * the probabilities block by block from the saved logsumexp. As in torch,
 * the logsumexp output carries no gradient and the fused backward is not
 * differentiable again (it has no formula of its own): under create_graph
 * its results get a "NotImplemented" node that raises torch's error when
 * reached. */
#include "formula.h"


/* torch's fused backward has no formula: under create_graph its results
 * get a node of this kind, which raises when a gradient reaches it */
static int bw_not_implemented(EmNode *n, EmTensor **go, EmTensor **gi) {
    (void)go, (void)gi;
    PyErr_Format(PyExc_RuntimeError, "derivative for aten::%s is not implemented", em_op_defs[n->op].name);
    return -1;
}

/* res: (dq, dk, dv) from the fused backward of ins (grad_out, q, k, v);
 * when some of ins take part in the graph, the results hang off a
 * "NotImplemented" node with edges to them (torch's behaviour). */
static int attach_not_implemented(PyObject *res, PyObject **ins, int nin, EmOpId op) {
    bool any = false;
    for (int i = 0; i < nin; i++) any |= em_requires_grad((EmTensor *)ins[i]);
    if (!any) return 0;
    EmNode *nd = em_node_new(EM_NODE_OP, "NotImplemented", nin, 3);
    if (!nd) return -1;
    nd->op = op;
    nd->backward = bw_not_implemented;
    int rc = -1;
    for (int i = 0; i < nin; i++) {
        EmTensor *t = (EmTensor *)ins[i];
        if (em_meta_set(&nd->in_meta[i], t) < 0) goto done;
        if (em_requires_grad(t) && em_gradient_edge(t, &nd->next[i]) < 0) goto done;
    }
    for (int j = 0; j < 3; j++) {
        EmTensor *t = (EmTensor *)PyTuple_GET_ITEM(res, j);
        if (em_meta_set(&nd->out_meta[j], t) < 0) goto done;
        Py_XSETREF(t->grad_fn, Py_NewRef((PyObject *)nd));
        t->output_nr = j;
        t->version_seen = em_version(t);
    }
    rc = 0;
done:
    Py_DECREF(nd);
    return rc;
}

/* _scaled_dot_product_flash_attention_for_cpu(query, key, value, dropout_p,
 * is_causal, *, attn_mask, scale); tensor inputs 0..3 = q, k, v, mask */
int bw_sdpa_flash_cpu(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (!G(0) || !(need(n, 0) || need(n, 1) || need(n, 2))) END;
    PyObject *args[10] = {G(0), IN(0), IN(1), IN(2), OUT(0), OUT(1), ARG(3), ARG(4), optional_in(S, n, 3), ARG(6)};
    PyObject *r = call_n(S, EM_OP__scaled_dot_product_flash_attention_for_cpu_backward, 10, args);
    if (!r) END;
    if (em_grad_enabled() && attach_not_implemented(r, args, 4, EM_OP__scaled_dot_product_flash_attention_for_cpu_backward) < 0) {
        sc.failed = true;
        END;
    }
    for (int k = 0; k < 3; k++)
        if (need(n, k)) SET(k, PyTuple_GET_ITEM(r, k));
    END;
}

/* _scaled_dot_product_flash_attention(query, key, value, dropout_p,
 * is_causal, return_debug_mask, *, scale) (the CUDA op): its backward op
 * with the forward's output and logsumexp; max_q / max_k from the inputs. */
int bw_sdpa_flash(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (!G(0) || !(need(n, 0) || need(n, 1) || need(n, 2))) END;
    /* the forward's philox seed and offset: its dropout mask again */
    PyObject *args[15] = {G(0), IN(0), IN(1), IN(2), OUT(0), OUT(1), Py_None, Py_None,
                          INT(em_meta_sizes(&n->in_meta[0])[2]), INT(em_meta_sizes(&n->in_meta[1])[2]), ARG(3),
                          ARG(4), OUT(6), OUT(7), ARG(6)};
    for (int i = 0; i < 15; i++)
        if (!args[i]) END;
    PyObject *r = call_n(S, EM_OP__scaled_dot_product_flash_attention_backward, 15, args);
    if (!r) END;
    if (em_grad_enabled() && attach_not_implemented(r, args, 4, EM_OP__scaled_dot_product_flash_attention_backward) < 0) {
        sc.failed = true;
        END;
    }
    for (int k = 0; k < 3; k++)
        if (need(n, k)) SET(k, PyTuple_GET_ITEM(r, k));
    END;
}

/* _scaled_dot_product_efficient_attention(query, key, value, attn_bias,
 * compute_log_sumexp, dropout_p, is_causal, *, scale): its
 * backward op with the forward's output, logsumexp, philox seed and offset.
 * attn_bias gets no gradient: asked for one, this raises. */
int bw_sdpa_efficient(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 3)) {
        PyErr_SetString(PyExc_RuntimeError, "_scaled_dot_product_efficient_attention_backward: ember's kernel "
                        "computes no gradient for attn_bias");
        sc.failed = true;
        END;
    }
    if (!G(0) || !(need(n, 0) || need(n, 1) || need(n, 2))) END;
    PyObject *mask = keep(S, Py_BuildValue("[OOOO]", need(n, 0) ? Py_True : Py_False, need(n, 1) ? Py_True : Py_False,
                                           need(n, 2) ? Py_True : Py_False, Py_False));
    PyObject *args[13] = {G(0), IN(0), IN(1), IN(2), optional_in(S, n, 3), OUT(0), OUT(1), OUT(2), OUT(3), ARG(5),
                          mask, ARG(6), ARG(7)};
    for (int i = 0; i < 13; i++)
        if (!args[i]) END;
    PyObject *r = call_n(S, EM_OP__scaled_dot_product_efficient_attention_backward, 13, args);
    if (!r) END;
    if (em_grad_enabled() && attach_not_implemented(r, args, 4, EM_OP__scaled_dot_product_efficient_attention_backward) < 0) {
        sc.failed = true;
        END;
    }
    for (int k = 0; k < 3; k++)
        if (need(n, k)) SET(k, PyTuple_GET_ITEM(r, k));
    END;
}


