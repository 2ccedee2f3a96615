/* KV offload between this GPU's device pool and this process's pinned host pool (issue 53): a block
 * list swapped out (device -> host) or in (host -> device) by one of three posting paths of one plan:
 *
 *   RB_OFF_KERNEL     a copy kernel of ours through the pool's mapped pointers: one warp a block, each
 *                     lane loading up to LANE_BYTES into registers before storing any (the shape
 *                     FIELD_NOTES found best), at a PACE the caller sets: grid CTAs x threads a CTA
 *                     (threads in flight; each in flight holds LANE_BYTES). A kernel storing to host
 *                     memory past a knee of threads in flight backs up into the GPU's memory system and
 *                     stalls a model on its other SMs (1.2-2.5x on an H200): the pace is a setting to sweep.
 *   RB_OFF_CE_BATCH   the copy engines: one cudaMemcpyBatchAsync a list (cudacommon.cuh's batch_copy).
 *   RB_OFF_DIRECT     one cudaMemcpyAsync a block (what SGLang calls direct).
 *   RB_OFF_CONTIGUOUS one cudaMemcpyAsync of the list's bytes from the pools' starts: the reference.
 *
 * A step posts the list `repeat` times back to back on the plan's stream between two events (the GPU's
 * seconds), the host's seconds in the posting calls beside it, and waits at most `timeout` s. The copy
 * engines armed ahead are armed.cu's (a host end is accepted there). Built on first use with nvcc
 * (rdmabench/wire/offload.py), loaded through ctypes; errors come back as a code and one line. */

#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudacommon.cuh"

#define RB_OFF_OK 0
#define RB_OFF_TIMEOUT 1
#define RB_OFF_CUDA 2
#define RB_OFF_NO_MEMORY 3
#define RB_OFF_UNSUPPORTED 4
#define RB_OFF_ARGUMENT 5

#define RB_OFF_OUT 0 /* swap-out: the device pool's blocks into the host pool's */
#define RB_OFF_IN 1  /* swap-in: the host pool's blocks into the device pool's */

#define RB_OFF_KERNEL 0
#define RB_OFF_CE_BATCH 1
#define RB_OFF_DIRECT 2
#define RB_OFF_CONTIGUOUS 3

#define RB_OFF_MAX_THREADS 1024 /* threads a CTA */
#define RB_OFF_MAX_CTAS 65536   /* CTAs a grid */
#define LANE_WORDS 8            /* 16-byte words a lane holds before storing: ... */
#define LANE_BYTES (16 * LANE_WORDS) /* ... 128 B, a warp 4 KiB */

struct rb_off_plan {
    int device;
    char *dev_pool, *host_pool, *host_mapped; /* the host pool as the host and as the GPU address it */
    size_t dev_bytes, host_bytes, count, block;
    uint64_t *dev_off, *host_off;   /* every block's offset in each pool, on the GPU (the kernel's) */
    void **out_src, **out_dst, **in_src, **in_dst; /* the host's lists of pointers (copy engines, direct) */
    size_t *sizes;
    int kernel_ok;                  /* every block and offset a multiple of 16 bytes */
    cudaStream_t stream;
    cudaEvent_t begin, end;
};

static int off_no_memory(char *why, size_t len)
{
    snprintf(why, len, "out of host memory for an offload plan");
    return RB_OFF_NO_MEMORY;
}

/* Blocks [first, first + count) of the list, src -> dst by offset: a warp a block, a grid-stride over
 * blocks; each lane loads LANE_WORDS 16-byte words (lane-interleaved: a warp's load is 512 B of one
 * block) before it stores any, so that a warp has 4 KiB of loads in flight. */
__global__ void copy_blocks(char *dst, const char *src, const uint64_t *dst_off, const uint64_t *src_off, size_t count,
                            size_t words)
{
    const unsigned lane = threadIdx.x & 31u;
    const size_t warp = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5;
    const size_t warps = (gridDim.x * (size_t)blockDim.x) >> 5;
    for (size_t b = warp; b < count; b += warps) {
        const uint4 *s = (const uint4 *)(src + src_off[b]);
        uint4 *d = (uint4 *)(dst + dst_off[b]);
        for (size_t base = 0; base < words; base += 32 * LANE_WORDS) {
            uint4 v[LANE_WORDS];
#pragma unroll
            for (int k = 0; k < LANE_WORDS; k++) {
                size_t i = base + (size_t)k * 32 + lane;
                if (i < words)
                    v[k] = s[i];
            }
#pragma unroll
            for (int k = 0; k < LANE_WORDS; k++) {
                size_t i = base + (size_t)k * 32 + lane;
                if (i < words)
                    d[i] = v[k];
            }
        }
    }
}

/* Why `device` cannot hold an offload plan, or NULL: no such GPU, or one that cannot address host
 * memory (mapped pinned memory needs unified addressing). */
static int device_missing(int device, char *why, size_t len)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || device < 0 || device >= count) {
        cudaGetLastError();
        snprintf(why, len, "no GPU %d here (%d visible)", device, count);
        return RB_OFF_UNSUPPORTED;
    }
    int mapped = 0, unified = 0;
    cudaDeviceGetAttribute(&mapped, cudaDevAttrCanMapHostMemory, device);
    cudaDeviceGetAttribute(&unified, cudaDevAttrUnifiedAddressing, device);
    if (!mapped || !unified) {
        snprintf(why, len, "GPU %d cannot address pinned host memory (mapped %d, unified addressing %d)", device,
                 mapped, unified);
        return RB_OFF_UNSUPPORTED;
    }
    return RB_OFF_OK;
}

/* The pools: the device pool this GPU's memory, the host pool pinned host memory the GPU can map. */
static int check_pools(struct rb_off_plan *p, char *why, size_t len)
{
    cudaPointerAttributes found;
    if (cudaPointerGetAttributes(&found, p->dev_pool) != cudaSuccess || found.type != cudaMemoryTypeDevice ||
        found.device != p->device) {
        cudaGetLastError();
        snprintf(why, len, "the device pool (%p) is not GPU %d's device memory", (void *)p->dev_pool, p->device);
        return RB_OFF_ARGUMENT;
    }
    if (cudaPointerGetAttributes(&found, p->host_pool) != cudaSuccess || found.type != cudaMemoryTypeHost) {
        cudaGetLastError();
        snprintf(why, len, "the host pool (%p) is not pinned host memory (cudaHostAlloc or cudaHostRegister)",
                 (void *)p->host_pool);
        return RB_OFF_ARGUMENT;
    }
    void *mapped = NULL;
    if (cuda_failed(cudaHostGetDevicePointer(&mapped, p->host_pool, 0), "cudaHostGetDevicePointer of the host pool",
                    why, len))
        return RB_OFF_ARGUMENT;
    p->host_mapped = (char *)mapped;
    return RB_OFF_OK;
}

/* Every block within both pools; the host's pointer lists of both directions; whether the kernel can
 * move them (16-byte words). */
static int hold_list(struct rb_off_plan *p, const uint64_t *dev_off, const uint64_t *host_off, char *why, size_t len)
{
    size_t n = p->count;
    p->out_src = (void **)malloc(n * sizeof(void *));
    p->out_dst = (void **)malloc(n * sizeof(void *));
    p->in_src = (void **)malloc(n * sizeof(void *));
    p->in_dst = (void **)malloc(n * sizeof(void *));
    p->sizes = (size_t *)malloc(n * sizeof(size_t));
    if (!p->out_src || !p->out_dst || !p->in_src || !p->in_dst || !p->sizes)
        return off_no_memory(why, len);
    p->kernel_ok = p->block % 16 == 0;
    for (size_t i = 0; i < n; i++) {
        if (dev_off[i] + p->block > p->dev_bytes || host_off[i] + p->block > p->host_bytes ||
            dev_off[i] > p->dev_bytes || host_off[i] > p->host_bytes) {
            snprintf(why, len, "block %zu (device offset %llu, host offset %llu, %zu bytes) runs past its pool", i,
                     (unsigned long long)dev_off[i], (unsigned long long)host_off[i], p->block);
            return RB_OFF_ARGUMENT;
        }
        p->kernel_ok &= dev_off[i] % 16 == 0 && host_off[i] % 16 == 0;
        p->out_src[i] = p->in_dst[i] = p->dev_pool + dev_off[i];
        p->out_dst[i] = p->in_src[i] = p->host_pool + host_off[i];
        p->sizes[i] = p->block;
    }
    return RB_OFF_OK;
}

static int upload(uint64_t **to, const uint64_t *from, size_t count, char *why, size_t len)
{
    if (cuda_failed(cudaMalloc((void **)to, count * sizeof(uint64_t)), "cudaMalloc of a block list", why, len) ||
        cuda_failed(cudaMemcpy(*to, from, count * sizeof(uint64_t), cudaMemcpyHostToDevice), "uploading a block list",
                    why, len))
        return RB_OFF_CUDA;
    return RB_OFF_OK;
}

/* The caller's current GPU, set back when an entry point returns (a rank's GPU is its own). */
struct off_device_kept {
    int before;
    off_device_kept()
    {
        if (cudaGetDevice(&before) != cudaSuccess) {
            before = -1;
            cudaGetLastError();
        }
    }
    ~off_device_kept()
    {
        if (before >= 0)
            cudaSetDevice(before);
    }
};

/* The list once, `first` to `first + count`, by `path` in `direction` on the plan's stream. */
static cudaError_t post_once(struct rb_off_plan *p, int path, int direction, size_t first, size_t count, int ctas,
                             int threads)
{
    int out = direction == RB_OFF_OUT;
    void **src = (out ? p->out_src : p->in_src) + first, **dst = (out ? p->out_dst : p->in_dst) + first;
    if (path == RB_OFF_KERNEL) {
        char *d = out ? p->host_mapped : p->dev_pool, *s = out ? p->dev_pool : p->host_mapped;
        const uint64_t *doff = (out ? p->host_off : p->dev_off) + first, *soff = (out ? p->dev_off : p->host_off) + first;
        copy_blocks<<<ctas, threads, 0, p->stream>>>(d, s, doff, soff, count, p->block / 16);
        return cudaGetLastError();
    }
    if (path == RB_OFF_CE_BATCH)
        return batch_copy(dst, src, p->sizes + first, count, out ? p->device : -1, out ? -1 : p->device, p->stream);
    if (path == RB_OFF_DIRECT) {
        for (size_t i = 0; i < count; i++) {
            cudaError_t err = cudaMemcpyAsync(dst[i], src[i], p->block, cudaMemcpyDefault, p->stream);
            if (err != cudaSuccess)
                return err;
        }
        return cudaSuccess;
    }
    return cudaMemcpyAsync(out ? p->host_pool : p->dev_pool, out ? p->dev_pool : p->host_pool, count * p->block,
                           cudaMemcpyDefault, p->stream);
}

/* Why a step of `path` cannot be posted as asked, or 0. */
static int check_step(struct rb_off_plan *p, int path, int direction, size_t first, size_t count, int ctas,
                      int threads, char *why, size_t len)
{
    if (direction != RB_OFF_OUT && direction != RB_OFF_IN) {
        snprintf(why, len, "direction %d is neither swap-out (%d) nor swap-in (%d)", direction, RB_OFF_OUT, RB_OFF_IN);
        return RB_OFF_ARGUMENT;
    }
    if (path < RB_OFF_KERNEL || path > RB_OFF_CONTIGUOUS || count == 0 || first > p->count ||
        count > p->count - first) {
        snprintf(why, len, "path %d, blocks %zu to %zu of %zu: no such step", path, first, first + count, p->count);
        return RB_OFF_ARGUMENT;
    }
    if (path == RB_OFF_KERNEL && !p->kernel_ok) {
        snprintf(why, len, "the offload kernel moves 16-byte words: %zu-byte blocks or their offsets are not", p->block);
        return RB_OFF_ARGUMENT;
    }
    if (path == RB_OFF_KERNEL && (ctas < 1 || ctas > RB_OFF_MAX_CTAS || threads < 32 ||
                                  threads > RB_OFF_MAX_THREADS || threads % 32 != 0)) {
        snprintf(why, len, "a pace of %d CTAs x %d threads: CTAs 1 to %d, threads a multiple of 32 up to %d", ctas,
                 threads, RB_OFF_MAX_CTAS, RB_OFF_MAX_THREADS);
        return RB_OFF_ARGUMENT;
    }
    if (path == RB_OFF_CE_BATCH && batch_copy_missing() != NULL) {
        snprintf(why, len, "%s", batch_copy_missing());
        return RB_OFF_UNSUPPORTED;
    }
    if (path == RB_OFF_CONTIGUOUS && (count * p->block > p->dev_bytes || count * p->block > p->host_bytes)) {
        snprintf(why, len, "a contiguous copy of %zu bytes needs pools that large", count * p->block);
        return RB_OFF_ARGUMENT;
    }
    return RB_OFF_OK;
}

/* The end event polled until `timeout` s from `began`. */
static int wait_end(struct rb_off_plan *p, double began, double timeout, char *why, size_t len)
{
    cudaError_t err;
    while ((err = cudaEventQuery(p->end)) == cudaErrorNotReady)
        if (now() - began > timeout) {
            snprintf(why, len, "an offload step had not landed %.0f s after it was posted", timeout);
            return RB_OFF_TIMEOUT;
        }
    return cuda_failed(err, "an offload step", why, len) ? RB_OFF_CUDA : RB_OFF_OK;
}

extern "C" {

/* "name=value;" items: the codes and bounds as compiled (offload.py checks them against its mirror). */
const char *rb_off_abi(void)
{
    return "RB_OFF_OK=0;RB_OFF_TIMEOUT=1;RB_OFF_CUDA=2;RB_OFF_NO_MEMORY=3;RB_OFF_UNSUPPORTED=4;RB_OFF_ARGUMENT=5;"
           "RB_OFF_OUT=0;RB_OFF_IN=1;RB_OFF_KERNEL=0;RB_OFF_CE_BATCH=1;RB_OFF_DIRECT=2;RB_OFF_CONTIGUOUS=3;"
           "RB_OFF_MAX_THREADS=1024;RB_OFF_MAX_CTAS=65536;LANE_BYTES=128;";
}

/* Why GPU `device` cannot offload to pinned host memory, or 0 (with one line in `why`). */
int rb_off_unsupported(int device, char *why, size_t len)
{
    off_device_kept kept;
    return device_missing(device, why, len);
}

/* The SMs of GPU `device`, or 0. */
int rb_off_sm_count(int device)
{
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return sms;
}

void rb_off_release(rb_off_plan *p)
{
    off_device_kept kept;
    if (p == NULL)
        return;
    cudaSetDevice(p->device);
    if (p->stream != NULL) {
        cudaStreamSynchronize(p->stream);
        cudaStreamDestroy(p->stream);
    }
    if (p->begin != NULL)
        cudaEventDestroy(p->begin);
    if (p->end != NULL)
        cudaEventDestroy(p->end);
    cudaFree(p->dev_off);
    cudaFree(p->host_off);
    free(p->out_src);
    free(p->out_dst);
    free(p->in_src);
    free(p->in_dst);
    free(p->sizes);
    free(p);
}

/* A plan of `count` blocks of `block` bytes between GPU `device`'s pool (`dev_pool`, `dev_bytes`) and
 * the pinned host pool (`host_pool`, `host_bytes`), block i at dev_off[i] and host_off[i]. The plan is
 * made even when it fails (*out: release it). */
int rb_off_create(int device, void *dev_pool, size_t dev_bytes, void *host_pool, size_t host_bytes,
                  const uint64_t *dev_off, const uint64_t *host_off, size_t count, size_t block, rb_off_plan **out,
                  char *why, size_t len)
{
    off_device_kept kept;
    *out = NULL;
    if (count == 0 || block == 0) {
        snprintf(why, len, "an offload list of %zu blocks of %zu bytes: no such list", count, block);
        return RB_OFF_ARGUMENT;
    }
    int rc = device_missing(device, why, len);
    if (rc != RB_OFF_OK)
        return rc;
    rb_off_plan *p = (rb_off_plan *)calloc(1, sizeof(rb_off_plan));
    if (p == NULL)
        return off_no_memory(why, len);
    *out = p;
    p->device = device;
    p->dev_pool = (char *)dev_pool;
    p->host_pool = (char *)host_pool;
    p->dev_bytes = dev_bytes;
    p->host_bytes = host_bytes;
    p->count = count;
    p->block = block;
    if (cuda_failed(cudaSetDevice(device), "cudaSetDevice", why, len))
        return RB_OFF_CUDA;
    if ((rc = check_pools(p, why, len)) != RB_OFF_OK || (rc = hold_list(p, dev_off, host_off, why, len)) != RB_OFF_OK ||
        (rc = upload(&p->dev_off, dev_off, count, why, len)) != RB_OFF_OK ||
        (rc = upload(&p->host_off, host_off, count, why, len)) != RB_OFF_OK)
        return rc;
    if (cuda_failed(cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking), "cudaStreamCreate", why, len) ||
        cuda_failed(cudaEventCreate(&p->begin), "cudaEventCreate", why, len) ||
        cuda_failed(cudaEventCreate(&p->end), "cudaEventCreate", why, len))
        return RB_OFF_CUDA;
    return RB_OFF_OK;
}

/* Blocks [first, first + count) by `path` in `direction`, `repeat` times back to back between two
 * events, the kernel at `ctas` x `threads`; waits at most `timeout` s. `gpu_seconds`: the events'
 * time; `post_seconds`: the host's time in the posting calls. */
int rb_off_step(rb_off_plan *p, int path, int direction, size_t first, size_t count, int repeat, int ctas, int threads,
                double timeout, double *gpu_seconds, double *post_seconds, char *why, size_t len)
{
    off_device_kept kept;
    *gpu_seconds = *post_seconds = 0.0;
    int rc = check_step(p, path, direction, first, count, ctas, threads, why, len);
    if (rc != RB_OFF_OK)
        return rc;
    if (repeat < 1) {
        snprintf(why, len, "a step posts its list at least once, not %d times", repeat);
        return RB_OFF_ARGUMENT;
    }
    if (cuda_failed(cudaSetDevice(p->device), "cudaSetDevice", why, len) ||
        cuda_failed(cudaEventRecord(p->begin, p->stream), "cudaEventRecord", why, len))
        return RB_OFF_CUDA;
    double began = now();
    for (int r = 0; r < repeat; r++)
        if (cuda_failed(post_once(p, path, direction, first, count, ctas, threads), "posting an offload list", why,
                        len))
            return RB_OFF_CUDA;
    *post_seconds = now() - began;
    if (cuda_failed(cudaEventRecord(p->end, p->stream), "cudaEventRecord", why, len))
        return RB_OFF_CUDA;
    if ((rc = wait_end(p, began, timeout, why, len)) != RB_OFF_OK)
        return rc;
    float ms = 0;
    if (cuda_failed(cudaEventElapsedTime(&ms, p->begin, p->end), "cudaEventElapsedTime", why, len))
        return RB_OFF_CUDA;
    *gpu_seconds = 1e-3 * (double)ms;
    return RB_OFF_OK;
}

/* Why the copy engines' batch (cudaMemcpyBatchAsync) cannot run here, or NULL. */
const char *rb_off_ce_unsupported(void) { return batch_copy_missing(); }

/* The host pool as the GPU addresses it (the kernel's end). */
void *rb_off_mapped(rb_off_plan *p) { return p->host_mapped; }

} /* extern "C" */
