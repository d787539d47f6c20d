/* memcpy.cpp — contiguous byte copies between host and devices, on the
 * current stream of the device involved (of the destination for a copy
 * between two GPUs). Synchronous unless non_blocking, as torch's copy_:
 * a blocking copy waits for its stream, so the host may read or reuse its
 * buffer on return.
 *
 * Between two devices the copy must also follow the work already queued on
 * the source's stream (which may still be writing src) and come before
 * what is queued there later (which may reuse src's memory): two events
 * tie the streams together both ways. */
#include <cstring>

#include "runtime.h"

static int sync_if_blocking(cudaStream_t s, bool non_blocking) {
    return non_blocking ? 0 : EMC_CHECK(cudaStreamSynchronize(s));
}

/* Stream `waiter` of device `wdev` waits for the work queued so far on
 * `stream` of device `dev`. (NULL names a device's default stream only while
 * that device is current, hence the two guards.) */
static int stream_waits(int wdev, cudaStream_t waiter, int dev, cudaStream_t stream) {
    cudaEvent_t e;
    {
        EmcDeviceGuard g(dev);
        if (!g.ok) return -1;
        if (EMC_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming)) < 0) return -1;
        if (EMC_CHECK(cudaEventRecord(e, stream)) < 0) {
            cudaEventDestroy(e);
            return -1;
        }
    }
    EmcDeviceGuard g(wdev);
    int rc = g.ok ? EMC_CHECK(cudaStreamWaitEvent(waiter, e, 0)) : -1;
    cudaEventDestroy(e); /* released once the wait is done */
    return rc;
}

static int peer_copy(void *dst, int dd, const void *src, int sd, size_t n, bool non_blocking) {
    cudaStream_t ds = (cudaStream_t)emc_current_stream(dd);
    cudaStream_t ss = (cudaStream_t)emc_current_stream(sd);
    if (stream_waits(dd, ds, sd, ss) < 0) return -1;
    {
        EmcDeviceGuard g(dd);
        if (!g.ok || EMC_CHECK(cudaMemcpyPeerAsync(dst, dd, src, sd, n, ds)) < 0) return -1;
    }
    /* the source device's later work (a reuse of src) waits for the copy */
    if (stream_waits(sd, ss, dd, ds) < 0) return -1;
    if (non_blocking) return 0;
    EmcDeviceGuard g(dd);
    return g.ok ? EMC_CHECK(cudaStreamSynchronize(ds)) : -1;
}

int emc_memcpy(void *dst, int dd, const void *src, int sd, size_t n, bool non_blocking) {
    if (n == 0) return 0;
    if (dd < 0 && sd < 0) {
        memmove(dst, src, n);
        return 0;
    }
    if (dd >= 0 && sd >= 0 && dd != sd) return peer_copy(dst, dd, src, sd, n, non_blocking);
    int dev = dd >= 0 ? dd : sd;
    cudaMemcpyKind kind = dd < 0   ? cudaMemcpyDeviceToHost
                          : sd < 0 ? cudaMemcpyHostToDevice
                                   : cudaMemcpyDeviceToDevice;
    EmcDeviceGuard g(dev);
    if (!g.ok) return -1;
    cudaStream_t s = (cudaStream_t)emc_current_stream(dev);
    if (EMC_CHECK(cudaMemcpyAsync(dst, src, n, kind, s)) < 0) return -1;
    if (non_blocking && kind != cudaMemcpyDeviceToDevice) /* Note [pinned host cache] */
        emc_host_record_use(dd < 0 ? dst : src, dev, s);
    return sync_if_blocking(s, non_blocking);
}
