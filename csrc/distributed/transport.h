/* transport.h — ember's own CPU collective transport (the "gloo" backend;
 * not the Gloo library): a full mesh of TCP connections between the ranks of
 * a process group, driven by poll() so that every transfer of one step runs
 * at once and nothing blocks past the group's timeout.
 *
 * Files: socket_io.c (listen/connect, the poll loop), reduce_kernels.c
 * (dst = op(dst, src) for every dtype), collectives.c (the algorithms and
 * the Python type _C._GlooComm). No Python calls happen while the GIL is
 * released: the loops report errors as text in EmComm.err and the caller
 * turns it into DistBackendError. */
#ifndef EM_DIST_TRANSPORT_H
#define EM_DIST_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/* torch's ReduceOp values (SUM=0 ... BXOR=7). */
enum { EM_DIST_SUM, EM_DIST_AVG, EM_DIST_PRODUCT, EM_DIST_MIN, EM_DIST_MAX,
       EM_DIST_BAND, EM_DIST_BOR, EM_DIST_BXOR, EM_DIST_NUM_OPS };

typedef struct {
    int rank, size;
    int listen_fd;
    int port;
    int *fds;       /* [size]; fds[rank] == -1 */
    double timeout; /* seconds without progress before a transfer fails */
    bool broken;    /* an earlier transfer failed midway: the streams are out of step */
    char err[512];
} EmComm;

/* One pending transfer: `len` bytes to or from `peer`. A receive may name a
 * combine step (op >= 0): each whole element that arrives in `buf` is folded
 * into `acc` (acc[i] = op(acc[i], buf[i])) while the rest is still on the
 * wire, which pipelines the reduction behind the network. */
typedef struct {
    int peer;
    bool is_send;
    char *buf;
    size_t len, done;
    int op, dtype;  /* combine step, or op = -1 */
    char *acc;
    size_t folded;  /* bytes of buf already combined into acc */
    const int64_t *expect; /* a header receive: what the sender's header must say */
} EmXfer;

double em_dist_now(void);
int em_dist_listen(EmComm *c, const char *host);
/* Connect the mesh: hosts[i]:ports[i] is rank i's listener. Lower ranks
 * accept, higher ranks connect; each side names itself with its rank. */
int em_dist_connect(EmComm *c, const char *const *hosts, const int *ports);
void em_dist_close(EmComm *c);
/* Run all transfers to completion. Transfers to one peer in one direction
 * go in list order (a header before its payload); -1 with c->err set on a dead peer,
 * a socket error or `timeout` seconds without any progress. */
int em_dist_run(EmComm *c, EmXfer *x, int n, const char *what);

/* dst[i] = op(dst[i], src[i]) for n elements of dtype; 0, or -1 when the op
 * does not apply to the dtype (message in err). */
int em_dist_combine(char *dst, const char *src, size_t n, int dtype, int op);
const char *em_dist_op_error(int dtype, int op); /* NULL when supported */
/* With the GIL: 0, or -1 with torch's exception (ValueError for complex, as
 * torch checks those first; RuntimeError otherwise) naming the collective. */
int em_dist_check_op(int dtype, int op, const char *what);
/* The AVG finish: divide n elements by `by` in place. */
void em_dist_divide(char *buf, size_t n, int dtype, int64_t by);

#endif
