/* socket_io.c — TCP plumbing of the CPU transport (Note in transport.h):
 * the listener, the mesh handshake and em_dist_run, the poll loop that
 * drives every transfer of one algorithm step at once. Sockets are
 * non-blocking, so a send never waits on a peer that is itself sending (the
 * ring's deadlock), and a peer that goes silent for the timeout, or closes
 * its end, fails the call instead of hanging it. Called without the GIL. */
#include "../ember.h" /* Python.h first: it sets _GNU_SOURCE (accept4) */
#include "transport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HELLO_MAGIC 0x656d6272u /* "embr" */
#define SOCK_BUF (4 << 20)

double em_dist_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void tune_socket(int fd) {
    int one = 1, buf = SOCK_BUF;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
}

static int set_nonblocking(int fd) {
    int fl = fcntl(fd, F_GETFL, 0);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static int resolve(const char *host, int port, struct sockaddr_storage *out, socklen_t *len,
                   char *err, size_t errlen) {
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int r = getaddrinfo(host, ps, &hints, &res);
    if (r != 0 || !res) {
        snprintf(err, errlen, "cannot resolve host '%s': %s", host, gai_strerror(r));
        return -1;
    }
    memcpy(out, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

int em_dist_listen(EmComm *c, const char *host) {
    struct sockaddr_storage sa;
    socklen_t len;
    if (resolve(host, 0, &sa, &len, c->err, sizeof c->err) < 0) return -1;
    int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, len) < 0 || listen(fd, c->size + 8) < 0) {
        snprintf(c->err, sizeof c->err, "cannot listen on %s: %s", host, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    len = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &len);
    c->port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                             : ((struct sockaddr_in *)&sa)->sin_port);
    c->listen_fd = fd;
    return 0;
}

/* Blocking-with-deadline helpers for the handshake (fd non-blocking). */
static int wait_fd(int fd, short ev, double deadline) {
    for (;;) {
        double left = deadline - em_dist_now();
        if (left <= 0) return 0;
        struct pollfd p = {fd, ev, 0};
        int r = poll(&p, 1, (int)(left * 1000) + 1);
        if (r > 0) return 1;
        if (r < 0 && errno != EINTR) return -1;
    }
}

static int io_all(int fd, void *buf, size_t len, bool is_send, double deadline) {
    size_t done = 0;
    while (done < len) {
        ssize_t k = is_send ? send(fd, (char *)buf + done, len - done, MSG_NOSIGNAL)
                            : recv(fd, (char *)buf + done, len - done, 0);
        if (k > 0) {
            done += (size_t)k;
            continue;
        }
        if (k == 0) return -1;
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
        if (wait_fd(fd, is_send ? POLLOUT : POLLIN, deadline) <= 0) return -1;
    }
    return 0;
}

int em_dist_connect(EmComm *c, const char *const *hosts, const int *ports) {
    double deadline = em_dist_now() + c->timeout;
    set_nonblocking(c->listen_fd);
    /* higher ranks connect to us: accept them, each says who it is */
    int want = c->size - 1 - c->rank;
    for (int j = 0; j < c->rank; j++) {
        /* connect to each lower rank, retrying while its listener is not up */
        struct sockaddr_storage sa;
        socklen_t len;
        if (resolve(hosts[j], ports[j], &sa, &len, c->err, sizeof c->err) < 0) return -1;
        int fd = -1;
        for (;;) {
            fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, len) == 0) break;
            int e = errno;
            if (fd >= 0) close(fd);
            fd = -1;
            if (em_dist_now() > deadline) {
                snprintf(c->err, sizeof c->err, "rank %d could not connect to rank %d at %s:%d: %s",
                         c->rank, j, hosts[j], ports[j], strerror(e));
                return -1;
            }
            usleep(20000);
        }
        tune_socket(fd);
        set_nonblocking(fd);
        uint32_t hello[2] = {HELLO_MAGIC, (uint32_t)c->rank};
        if (io_all(fd, hello, sizeof hello, true, deadline) < 0) {
            snprintf(c->err, sizeof c->err, "rank %d: handshake with rank %d failed", c->rank, j);
            close(fd);
            return -1;
        }
        c->fds[j] = fd;
    }
    while (want > 0) {
        int r = wait_fd(c->listen_fd, POLLIN, deadline);
        if (r <= 0) {
            snprintf(c->err, sizeof c->err,
                     "rank %d timed out after %.1f s waiting for %d higher rank(s) to connect",
                     c->rank, c->timeout, want);
            return -1;
        }
        int fd = accept4(c->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) continue;
        tune_socket(fd);
        uint32_t hello[2];
        if (io_all(fd, hello, sizeof hello, false, deadline) < 0 || hello[0] != HELLO_MAGIC ||
            (int)hello[1] <= c->rank || (int)hello[1] >= c->size || c->fds[hello[1]] >= 0) {
            close(fd); /* a stray connection: not one of ours */
            continue;
        }
        c->fds[hello[1]] = fd;
        want--;
    }
    return 0;
}

void em_dist_close(EmComm *c) {
    if (c->fds)
        for (int i = 0; i < c->size; i++)
            if (c->fds[i] >= 0) {
                close(c->fds[i]);
                c->fds[i] = -1;
            }
    if (c->listen_fd >= 0) close(c->listen_fd);
    c->listen_fd = -1;
}

/* -1 when the combine refuses the dtype/op: the callers check the op first,
 * so this is a bug, reported rather than left as an unreduced result */
static int fold(EmXfer *x) {
    int isz = em_itemsize((EmDType)x->dtype);
    size_t whole = x->done / isz * isz;
    if (whole > x->folded) {
        if (em_dist_combine(x->acc + x->folded, x->buf + x->folded, (whole - x->folded) / isz, x->dtype,
                            x->op) < 0)
            return -1;
        x->folded = whole;
    }
    return 0;
}

static int check_header(EmComm *c, EmXfer *w) {
    const int64_t *h = (const int64_t *)w->buf, *e = w->expect;
    if (h[0] == e[0] && h[1] == e[1] && h[2] == e[2] && h[3] == e[3]) return 0;
    int d0 = (int)h[1], d1 = (int)e[1];
    if (h[0] != e[0])
        snprintf(c->err, sizeof c->err,
                 "rank %d: recv from rank %d found a collective's data, not a point-to-point "
                 "message (the ranks' calls are out of order)", c->rank, w->peer);
    else
        snprintf(c->err, sizeof c->err,
                 "rank %d: recv from rank %d expected %lld elements of %s with tag %lld, but the "
                 "sender sent %lld elements of %s with tag %lld",
                 c->rank, w->peer, (long long)e[2],
                 d1 >= 0 && d1 < EM_NUM_DTYPES ? em_dtype_name((EmDType)d1) : "?", (long long)e[3],
                 (long long)h[2], d0 >= 0 && d0 < EM_NUM_DTYPES ? em_dtype_name((EmDType)d0) : "?",
                 (long long)h[3]);
    c->broken = true; /* the payload that follows is not what this rank can read */
    return -1;
}

int em_dist_run(EmComm *c, EmXfer *x, int n, const char *what) {
    struct pollfd stackp[16];
    int stackmap[16];
    struct pollfd *p = n <= 16 ? stackp : malloc(sizeof *p * n);
    int *map = n <= 16 ? stackmap : malloc(sizeof *map * n);
    /* busy[2 * peer + is_send]: a transfer that way is ahead in the list */
    char *busy = calloc(2 * (size_t)c->size, 1);
    int rc = -1;
    if (!p || !map || !busy) {
        snprintf(c->err, sizeof c->err, "out of memory in %s", what);
        goto done;
    }
    double last = em_dist_now();
    for (;;) {
        int np = 0;
        memset(busy, 0, 2 * (size_t)c->size);
        for (int i = 0; i < n; i++)
            if (x[i].done < x[i].len) {
                char *b = &busy[2 * x[i].peer + x[i].is_send];
                if (*b) continue;
                *b = 1;
                p[np].fd = c->fds[x[i].peer];
                p[np].events = x[i].is_send ? POLLOUT : POLLIN;
                p[np].revents = 0;
                map[np++] = i;
            }
        if (np == 0) break;
        double left = last + c->timeout - em_dist_now();
        if (left <= 0) {
            EmXfer *w = &x[map[0]];
            snprintf(c->err, sizeof c->err,
                     "rank %d: %s timed out after %.1f s %s rank %d (is that rank alive and in the "
                     "same collective?)",
                     c->rank, what, c->timeout, w->is_send ? "sending to" : "waiting for", w->peer);
            c->broken = true;
            goto done;
        }
        int r = poll(p, np, (int)(left * 1000) + 1);
        if (r < 0) {
            if (errno == EINTR) continue;
            snprintf(c->err, sizeof c->err, "rank %d: poll failed in %s: %s", c->rank, what,
                     strerror(errno));
            c->broken = true;
            goto done;
        }
        for (int k = 0; k < np; k++) {
            if (!p[k].revents) continue;
            EmXfer *w = &x[map[k]];
            /* move as much as the socket takes now, in a few calls at most */
            for (int rounds = 0; rounds < 4 && w->done < w->len; rounds++) {
                ssize_t got = w->is_send
                    ? send(p[k].fd, w->buf + w->done, w->len - w->done, MSG_NOSIGNAL)
                    : recv(p[k].fd, w->buf + w->done, w->len - w->done, 0);
                if (got > 0) {
                    w->done += (size_t)got;
                    last = em_dist_now();
                    if (!w->is_send && w->op >= 0 && fold(w) < 0) {
                        snprintf(c->err, sizeof c->err, "rank %d: %s cannot reduce dtype %d with op %d",
                                 c->rank, what, w->dtype, w->op);
                        c->broken = true;
                        goto done;
                    }
                    if (w->done == w->len && w->expect && check_header(c, w) < 0) goto done;
                    continue;
                }
                if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
                snprintf(c->err, sizeof c->err,
                         "rank %d: connection to rank %d %s during %s (did rank %d exit or crash?)",
                         c->rank, w->peer, got == 0 ? "was closed" : strerror(errno), what, w->peer);
                c->broken = true;
                goto done;
            }
        }
    }
    rc = 0;
done:
    if (p != stackp) free(p);
    if (map != stackmap) free(map);
    free(busy);
    return rc;
}
