/* allocator.cpp — the CUDA caching allocator and pinned host memory.
 *
 * Note [CUDA caching allocator]: cudaMalloc and cudaFree are slow (cudaFree
 * synchronizes the device), and a training step frees and allocates the same
 * sizes again and again. So memory taken from CUDA is kept:
 *  - a request is rounded up to 512 B. Small requests (<= 1 MiB) are carved
 *    from 2 MiB segments; a large one gets a segment of 20 MiB when it is
 *    under 10 MiB, else its size rounded up to 2 MiB (torch's classes, so
 *    memory_reserved reads alike).
 *  - a segment is a list of blocks in address order. A request takes the
 *    smallest free block that fits (from the pool of its class) and splits
 *    off the rest when that rest is worth keeping; a freed block merges with
 *    free neighbours, so a segment whose blocks are all free is one block
 *    again.
 *  - blocks remember the stream they were allocated on and are reused only
 *    for requests on that stream: work queued on a stream runs in order, so
 *    a block freed there may be handed out again at once, without waiting
 *    for the GPU. (Freeing from another stream changes nothing: the block
 *    goes back to its allocation stream's pool.) A block that other streams
 *    use too is named to the allocator by Tensor.record_stream (Note
 *    [record_stream]).
 *  - when cudaMalloc fails, the cached segments that are wholly free are
 *    released (cudaFree) and the cudaMalloc retried once: num_alloc_retries
 *    counts those, num_ooms the requests that still failed.
 *  - empty_cache releases every wholly free segment of every device.
 * Stats (EmCudaMemoryStats) count rounded block sizes (allocated) and
 * segment sizes (reserved), as torch's allocated_bytes / reserved_bytes do.
 * A mutex guards everything: the GIL is held by callers today, but the
 * allocator does not rely on it.
 *
 * Note [record_stream]: a block freed while another stream may still be
 * using it (work queued there that reads or writes it) must not be handed
 * out on its own stream at once. emc_record_stream notes such streams on
 * the block; its free then records an event on each and parks the block;
 * the block returns to its pool once every event has completed (checked at
 * each allocation on the device; waited for when memory runs out and by
 * empty_cache). Until then it counts as allocated, as in torch.
 *
 * Note [pinned host cache]: cudaHostAlloc page-locks memory and
 * cudaFreeHost synchronizes the device; a DataLoader with pin_memory=True
 * pins every batch. Freed pinned blocks are kept by size (a power of two of
 * at least 4 KiB) and handed out again, but only once the asynchronous
 * copies that used them are done: memcpy.cpp records an event on its stream
 * for every non_blocking copy from or to a cached block
 * (emc_host_record_use), and a free block is reused when all of its events
 * have completed. empty_cache releases the free blocks whose copies are done. */
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "runtime.h"

namespace {

constexpr size_t kRound = 512;                /* every block a multiple of this */
constexpr size_t kSmallSize = 1 << 20;        /* requests up to this are "small" */
constexpr size_t kSmallSegment = 2 << 20;     /* segments small blocks are cut from */
constexpr size_t kMinLargeAlloc = 10 << 20;   /* large requests under this ... */
constexpr size_t kLargeSegment = 20 << 20;    /* ... share a 20 MiB segment */
constexpr size_t kRoundLarge = 2 << 20;       /* larger ones round up to 2 MiB */

struct Block {
    int dev;
    cudaStream_t stream;
    char *ptr;
    size_t size;
    bool allocated = false;
    bool small;           /* which pool it belongs to */
    Block *prev = nullptr, *next = nullptr; /* neighbours in its segment */
    std::vector<cudaStream_t> uses = {};    /* other streams using it (Note [record_stream]) */
};

/* A freed block waiting for the work of the streams that used it. */
struct PendingFree {
    Block *block;
    std::vector<cudaEvent_t> events;
};

/* Free blocks ordered by (stream, size, address): lower_bound finds the
 * best fit on a stream. */
struct BySize {
    bool operator()(const Block *a, const Block *b) const {
        if (a->stream != b->stream) return (uintptr_t)a->stream < (uintptr_t)b->stream;
        if (a->size != b->size) return a->size < b->size;
        return (uintptr_t)a->ptr < (uintptr_t)b->ptr;
    }
};
using Pool = std::set<Block *, BySize>;

struct DeviceCache {
    Pool small_pool, large_pool;
    EmCudaMemoryStats stats{};
};

std::mutex mutex;
DeviceCache caches[EMC_MAX_DEVICES];
std::unordered_map<void *, Block *> live; /* handed-out blocks by address */
std::vector<PendingFree> pending;         /* Note [record_stream] */

size_t round_size(size_t n) { return n < kRound ? kRound : (n + kRound - 1) / kRound * kRound; }

size_t segment_size(size_t size) {
    if (size <= kSmallSize) return kSmallSegment;
    if (size < kMinLargeAlloc) return kLargeSegment;
    return (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

Pool &pool_of(DeviceCache &c, bool small) { return small ? c.small_pool : c.large_pool; }

void add_reserved(EmCudaMemoryStats &s, int64_t n) {
    s.reserved += n;
    if (s.reserved > s.max_reserved) s.max_reserved = s.reserved;
}

void add_allocated(EmCudaMemoryStats &s, int64_t n) {
    s.allocated += n;
    if (s.allocated > s.max_allocated) s.max_allocated = s.allocated;
}

/* cudaFree every wholly free segment of `dev` held in `pool`; the caller
 * holds the mutex and has made `dev` current. */
int release_free_segments(int dev, Pool &pool) {
    int rc = 0;
    for (auto it = pool.begin(); it != pool.end();) {
        Block *b = *it;
        if (b->prev || b->next) { /* part of a segment still in use */
            ++it;
            continue;
        }
        if (EMC_CHECK(cudaFree(b->ptr)) < 0) rc = -1;
        caches[dev].stats.reserved -= (int64_t)b->size;
        it = pool.erase(it);
        delete b;
    }
    return rc;
}

void release_pending(int dev, bool wait);

int release_device(int dev) {
    EmcDeviceGuard g(dev);
    if (!g.ok) return -1;
    if (!pending.empty()) release_pending(dev, true);
    int a = release_free_segments(dev, caches[dev].small_pool);
    int b = release_free_segments(dev, caches[dev].large_pool);
    return a < 0 || b < 0 ? -1 : 0;
}

/* A new segment from cudaMalloc, retried once after the cache is released. */
Block *new_segment(int dev, size_t size, bool small, cudaStream_t stream) {
    size_t seg = segment_size(size);
    EmCudaMemoryStats &st = caches[dev].stats;
    void *p = nullptr;
    cudaError_t err = cudaMalloc(&p, seg);
    if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        st.num_alloc_retries++;
        release_device(dev);
        err = cudaMalloc(&p, seg);
    }
    if (err != cudaSuccess) {
        if (err == cudaErrorMemoryAllocation) st.num_ooms++;
        cudaGetLastError();
        emc_fail("cudaMalloc: %s (%zu bytes on cuda:%d; %lld allocated, %lld reserved by ember)",
                 cudaGetErrorString(err), seg, dev, (long long)st.allocated, (long long)st.reserved);
        return nullptr;
    }
    add_reserved(st, (int64_t)seg);
    return new Block{dev, stream, (char *)p, seg, false, small};
}

/* Cut b to `size` bytes when the rest is worth a block of its own; the
 * rest goes back to the pool. */
void split(DeviceCache &c, Block *b, size_t size) {
    size_t rest = b->size - size;
    if (b->small ? rest < kRound : rest <= kSmallSize) return;
    Block *r = new Block{b->dev, b->stream, b->ptr + size, rest, false, b->small};
    r->prev = b;
    r->next = b->next;
    if (b->next) b->next->prev = r;
    b->next = r;
    b->size = size;
    pool_of(c, r->small).insert(r);
}

/* Merge free neighbour n into b (n follows b) and forget n. */
void absorb(Pool &pool, Block *b, Block *n) {
    pool.erase(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    delete n;
}

/* An allocated block back to its pool, merged with free neighbours. */
void release_block(Block *b) {
    DeviceCache &c = caches[b->dev];
    c.stats.allocated -= (int64_t)b->size;
    b->allocated = false;
    b->uses.clear();
    Pool &pool = pool_of(c, b->small);
    if (b->next && !b->next->allocated) absorb(pool, b, b->next);
    if (b->prev && !b->prev->allocated) {
        Block *p = b->prev;
        pool.erase(p);
        absorb(pool, p, b); /* b is not in the pool: erase finds nothing */
        b = p;
    }
    pool.insert(b);
}

/* Parked blocks of `dev` whose streams are done go back to their pools;
 * wait: wait for the streams instead of skipping busy ones. The caller
 * holds the mutex and has made `dev` current. */
void release_pending(int dev, bool wait) {
    for (size_t i = 0; i < pending.size();) {
        PendingFree &p = pending[i];
        bool done = p.block->dev == dev;
        for (size_t e = 0; done && e < p.events.size(); e++) {
            cudaError_t st = wait ? cudaEventSynchronize(p.events[e]) : cudaEventQuery(p.events[e]);
            if (st == cudaErrorNotReady) done = false;
            else if (st != cudaSuccess) cudaGetLastError(); /* a failed event waits for nothing */
        }
        if (!done) {
            i++;
            continue;
        }
        for (cudaEvent_t e : p.events) cudaEventDestroy(e);
        release_block(p.block);
        pending[i] = pending.back();
        pending.pop_back();
    }
}

/* ---- Note [pinned host cache] */
constexpr size_t kHostMinBlock = 4096;

struct HostBlock {
    size_t size;
    bool allocated;
    std::vector<std::pair<int, cudaEvent_t>> events; /* (device, event) of copies using it */
};
std::map<char *, HostBlock> host_blocks;      /* every cached block, by address */
std::multimap<size_t, char *> host_free_list; /* the free ones, by size */

size_t host_block_size(size_t n) {
    size_t s = kHostMinBlock;
    while (s < n && s < ((size_t)1 << 62)) s <<= 1;
    return s;
}

/* Whether every copy that used b is done; the finished events are dropped. */
bool host_block_idle(HostBlock &b) {
    for (size_t i = 0; i < b.events.size();) {
        EmcDeviceGuard g(b.events[i].first);
        cudaError_t st = g.ok ? cudaEventQuery(b.events[i].second) : cudaErrorInvalidDevice;
        if (st == cudaErrorNotReady) return false;
        if (st != cudaSuccess) cudaGetLastError();
        cudaEventDestroy(b.events[i].second);
        b.events[i] = b.events.back();
        b.events.pop_back();
    }
    return true;
}

} // namespace

void *emc_alloc(int dev, size_t nbytes, EmCudaStream stream) {
    if (nbytes > ((size_t)1 << 60)) {
        emc_fail("cannot allocate %zu bytes on cuda:%d", nbytes, dev);
        return nullptr;
    }
    EmcDeviceGuard g(dev);
    if (!g.ok) return nullptr;
    std::lock_guard<std::mutex> lock(mutex);
    if (!pending.empty()) release_pending(dev, false);
    DeviceCache &c = caches[dev];
    size_t size = round_size(nbytes);
    bool small = size <= kSmallSize;
    Pool &pool = pool_of(c, small);
    Block key{dev, (cudaStream_t)stream, nullptr, size, false, small};
    auto it = pool.lower_bound(&key);
    Block *b;
    if (it != pool.end() && (*it)->stream == (cudaStream_t)stream) {
        b = *it;
        pool.erase(it);
    } else {
        b = new_segment(dev, size, small, (cudaStream_t)stream);
        if (!b) return nullptr;
    }
    split(c, b, size);
    b->allocated = true;
    live[b->ptr] = b;
    add_allocated(c.stats, (int64_t)b->size);
    return b->ptr;
}

void emc_free(int dev, void *ptr, size_t nbytes, EmCudaStream stream) {
    if (!ptr) return;
    std::lock_guard<std::mutex> lock(mutex);
    auto it = live.find(ptr);
    if (it == live.end()) { /* not ours: never cudaFree a stranger */
        emc_fail("free of %p, which the CUDA caching allocator did not hand out", ptr);
        return;
    }
    Block *b = it->second;
    live.erase(it);
    if (b->uses.empty()) {
        release_block(b);
        return;
    }
    /* Note [record_stream]: park it until the other streams' work is done */
    EmcDeviceGuard g(b->dev);
    PendingFree p{b, {}};
    for (cudaStream_t s : b->uses) {
        cudaEvent_t e;
        if (g.ok && cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess) {
            if (cudaEventRecord(e, s) == cudaSuccess) {
                p.events.push_back(e);
                continue;
            }
            cudaEventDestroy(e);
        }
        cudaGetLastError(); /* no event: wait for the stream here instead */
        cudaStreamSynchronize(s);
        cudaGetLastError();
    }
    pending.push_back(p);
}

int emc_record_stream(int dev, void *ptr, EmCudaStream stream) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = live.find(ptr);
    if (it == live.end() || it->second->dev != dev)
        return emc_fail("record_stream: %p is not memory the CUDA caching allocator handed out on cuda:%d", ptr,
                        dev);
    Block *b = it->second;
    cudaStream_t s = (cudaStream_t)stream;
    if (s == b->stream) return 0; /* its own stream orders its reuse already */
    for (cudaStream_t u : b->uses)
        if (u == s) return 0;
    b->uses.push_back(s);
    return 0;
}

void emc_memory_stats(int dev, EmCudaMemoryStats *out) {
    std::lock_guard<std::mutex> lock(mutex);
    *out = dev >= 0 && dev < EMC_MAX_DEVICES ? caches[dev].stats : EmCudaMemoryStats{};
}

void emc_reset_peak_stats(int dev) {
    if (dev < 0 || dev >= EMC_MAX_DEVICES) return;
    std::lock_guard<std::mutex> lock(mutex);
    EmCudaMemoryStats &s = caches[dev].stats;
    s.max_allocated = s.allocated;
    s.max_reserved = s.reserved;
}

int emc_empty_cache(void) {
    std::lock_guard<std::mutex> lock(mutex);
    int rc = 0, n = emc_device_count();
    for (int dev = 0; dev < n; dev++)
        if (!caches[dev].small_pool.empty() || !caches[dev].large_pool.empty() || !pending.empty())
            if (release_device(dev) < 0) rc = -1;
    for (auto it = host_free_list.begin(); it != host_free_list.end();) {
        HostBlock &b = host_blocks.at(it->second);
        if (!host_block_idle(b)) {
            ++it;
            continue;
        }
        if (EMC_CHECK(cudaFreeHost(it->second)) < 0) rc = -1;
        host_blocks.erase(it->second);
        it = host_free_list.erase(it);
    }
    return rc;
}

/* ---------------------------------------------- pinned (page-locked) host */

void *emc_host_alloc(size_t nbytes) {
    if (emc_device_count() == 0) {
        emc_fail("pinned memory needs a CUDA device, and none is available");
        return nullptr;
    }
    if (nbytes > ((size_t)1 << 60)) {
        emc_fail("cannot pin %zu bytes of host memory", nbytes);
        return nullptr;
    }
    size_t size = host_block_size(nbytes);
    std::lock_guard<std::mutex> lock(mutex);
    auto range = host_free_list.equal_range(size);
    for (auto it = range.first; it != range.second; ++it) {
        HostBlock &b = host_blocks.at(it->second);
        if (!host_block_idle(b)) continue; /* a copy may still read or write it */
        char *p = it->second;
        host_free_list.erase(it);
        b.allocated = true;
        return p;
    }
    void *p = nullptr;
    if (EMC_CHECK(cudaHostAlloc(&p, size, cudaHostAllocPortable)) < 0) return nullptr;
    host_blocks[(char *)p] = HostBlock{size, true, {}};
    return p;
}

void emc_host_free(void *ptr) {
    if (!ptr) return;
    std::lock_guard<std::mutex> lock(mutex);
    auto it = host_blocks.find((char *)ptr);
    if (it == host_blocks.end() || !it->second.allocated) {
        emc_fail("free of %p, which the pinned host cache did not hand out", ptr);
        return;
    }
    it->second.allocated = false;
    host_free_list.emplace(it->second.size, it->first);
}

void emc_host_record_use(const void *ptr, int dev, EmCudaStream stream) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = host_blocks.upper_bound((char *)ptr);
    if (it == host_blocks.begin()) return;
    --it; /* the block starting at or before ptr */
    HostBlock &b = it->second;
    if ((const char *)ptr >= it->first + b.size || !b.allocated) return; /* pageable memory: not ours */
    host_block_idle(b); /* drop finished events so the list stays short */
    EmcDeviceGuard g(dev);
    cudaEvent_t e;
    if (!g.ok || cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
        cudaGetLastError();
        cudaStreamSynchronize((cudaStream_t)stream); /* no event: wait for the copy now */
        cudaGetLastError();
        return;
    }
    if (cudaEventRecord(e, (cudaStream_t)stream) != cudaSuccess) {
        cudaGetLastError();
        cudaEventDestroy(e);
        cudaStreamSynchronize((cudaStream_t)stream);
        cudaGetLastError();
        return;
    }
    b.events.emplace_back(dev, e);
}
