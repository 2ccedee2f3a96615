/* GPU-initiated block lists: UCX's device API (ucp/api/device, UCX 1.20+) posts every block of a list
 * from one kernel, instead of one ucp_put_nbx (a CUDA copy, an event) per block from the CPU.
 *
 * The host side builds UCX's descriptor lists once (ucp_device_local_mem_list_create and
 * ucp_device_remote_mem_list_create: the local pool's memory handle, the peer's pool through its
 * remote key and the endpoint's device lane) and uploads the block offsets to the GPU. A transfer is
 * then one kernel launch: CUDA block i of the grid moves descriptors i, i + grid, ... with
 * ucp_device_put (a put) or, for a get, with a copy out of the peer's pool as UCX maps it
 * (ucp_device_get_ptr). The same offsets through a plain copy kernel of our own, with both pools as
 * mapped pointers, is the ceiling: what the GPU itself does with the list, with no UCX in the way.
 * The copy engines' path moves the same list without a kernel: one cudaMemcpyBatchAsync per
 * transfer (CUDA 12.8+), each transfer on a stream of its own, so `batch` lists are in flight at once.
 *
 * Beside a model's compute the posting kernel may be held to fewer SMs (rb_dev_configure): a grid of
 * at most N CUDA blocks (a fixed SM budget), or a stream of a green context that owns N SMs
 * (gpuload.cu makes that partition).
 *
 * Built on first use with nvcc (rdmabench/wire/devapi.py), loaded through ctypes; the CPU-only
 * parts of rdmabench never need it. Errors come back as a code and one line of text. */

#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cudacommon.cuh"
#include <ucp/api/device/ucp_device_impl.h>
#include <ucp/api/device/ucp_host.h>
#include <ucp/api/ucp.h>

#define RB_DEV_OK 0
#define RB_DEV_TIMEOUT 1
#define RB_DEV_UCX 2
#define RB_DEV_CUDA 3
#define RB_DEV_NO_MEMORY 4
#define RB_DEV_UNSUPPORTED 5

/* The operations of a step: a put through UCX, a get (UCX's mapping, our copy), and the ceiling of
 * each direction (our copy kernel over both mapped pools). */
#define RB_DEV_PUT 0
#define RB_DEV_GET 1
#define RB_DEV_CEILING_PUT 2
#define RB_DEV_CEILING_GET 3
#define RB_DEV_CE_PUT 4
#define RB_DEV_CE_GET 5

#define THREADS 256

struct rb_dev_plan {
    ucp_device_local_mem_list_h local;
    ucp_device_remote_mem_list_h remote;
    char *pool;          /* this rank's pool (device memory) */
    char *mapped;        /* the peer's pool as UCX maps it into this process */
    uint64_t *offsets;   /* on the GPU: every block's offset in this rank's pool */
    uint64_t *remote_offsets;
    size_t total;        /* blocks over every transfer of a step */
    int grid;            /* CUDA blocks of a transfer's kernel */
    cudaStream_t stream;
    cudaEvent_t *done;   /* one per transfer of a step */
    int batch;
    int *failed;         /* device: descriptors UCX refused in the last kernel */
    /* How a posting kernel (a put, a get) launches: the whole GPU by default; beside compute, a grid
     * held to an SM budget, or a green context's stream (its context pushed around the launch). The
     * ceiling always runs on the whole GPU. */
    int post_grid, post_threads;
    cudaStream_t post_stream;
    CUcontext post_ctx;
    /* The copy engines' path: host copies of the offsets, a stream per transfer, and the batch's
     * arguments for the block size and direction they were last made for. */
    uint64_t *host_offsets, *host_remote_offsets;
    cudaStream_t *streams;
    void **ce_dst, **ce_src;
    size_t *ce_sizes;
    size_t ce_block;
    int ce_op;
    int device, peer_device;
};

/* Who moves one work item: a warp (blocks up to WARP_ITEM bytes: eight items in flight per CUDA
 * block) or a whole CUDA block (larger ones, cut into CHUNK-byte items so that one large block, the
 * contiguous reference say, spreads over the grid instead of one CUDA block). */
#define CHUNK (64 * 1024)
#define WARP_ITEM (8 * 1024)
#define WARP 32

template <ucs_device_level_t level> struct Lanes;
template <> struct Lanes<UCS_DEVICE_LEVEL_WARP> {
    __device__ static size_t lane() { return threadIdx.x % WARP; }
    __device__ static size_t lanes() { return WARP; }
    __device__ static size_t team() { return (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / WARP; }
    __device__ static size_t teams() { return gridDim.x * (size_t)blockDim.x / WARP; }
};
template <> struct Lanes<UCS_DEVICE_LEVEL_BLOCK> {
    __device__ static size_t lane() { return threadIdx.x; }
    __device__ static size_t lanes() { return blockDim.x; }
    __device__ static size_t team() { return blockIdx.x; }
    __device__ static size_t teams() { return gridDim.x; }
};

static int no_memory(char *why, size_t len)
{
    snprintf(why, len, "out of host memory for the GPU's block lists");
    return RB_DEV_NO_MEMORY;
}

/* A team copies `length` bytes: 16-byte words when both ends allow, else bytes. */
template <ucs_device_level_t level> __device__ static void copy_item(char *dst, const char *src, size_t length)
{
    size_t lane = Lanes<level>::lane(), lanes = Lanes<level>::lanes();
    if ((((uintptr_t)dst | (uintptr_t)src) & 15) == 0) {
        const int4 *s = reinterpret_cast<const int4 *>(src);
        int4 *d = reinterpret_cast<int4 *>(dst);
        size_t words = length / 16;
        for (size_t i = lane; i < words; i += lanes)
            d[i] = s[i];
        src += words * 16;
        dst += words * 16;
        length -= words * 16;
    }
    for (size_t i = lane; i < length; i += lanes)
        dst[i] = src[i];
}

/* Work item w: block first + w / per, bytes [at, at + length) of it. */
__device__ static void item(size_t w, size_t per, size_t first, size_t block, size_t *i, size_t *at, size_t *length)
{
    *i = first + w / per;
    *at = (w % per) * CHUNK;
    *length = block - *at < CHUNK ? block - *at : CHUNK;
}

template <ucs_device_level_t level>
__global__ void ucx_put_blocks(ucp_device_local_mem_list_h local, ucp_device_remote_mem_list_h remote,
                               const uint64_t *offsets, const uint64_t *remote_offsets, size_t first, size_t count,
                               size_t block, int *failed)
{
    size_t per = (block + CHUNK - 1) / CHUNK, i, at, length;
    for (size_t w = Lanes<level>::team(); w < count * per; w += Lanes<level>::teams()) {
        item(w, per, first, block, &i, &at, &length);
        ucs_status_t status = ucp_device_put<level>(local, 0, offsets[i] + at, remote, 0, remote_offsets[i] + at,
                                                    length, 0, UCP_DEVICE_FLAG_NODELAY, nullptr);
        if (status != UCS_OK && Lanes<level>::lane() == 0)
            atomicAdd(failed, 1);
    }
}

/* Our own copy of every block between two pools (both addressable here). */
template <ucs_device_level_t level>
__global__ void copy_blocks(char *dst, const uint64_t *dst_offsets, const char *src, const uint64_t *src_offsets,
                            size_t first, size_t count, size_t block)
{
    size_t per = (block + CHUNK - 1) / CHUNK, i, at, length;
    for (size_t w = Lanes<level>::team(); w < count * per; w += Lanes<level>::teams()) {
        item(w, per, first, block, &i, &at, &length);
        copy_item<level>(dst + dst_offsets[i] + at, src + src_offsets[i] + at, length);
    }
}

__global__ void mapped_pointer(ucp_device_remote_mem_list_h remote, void **out, int *failed)
{
    if (ucp_device_get_ptr(remote, 0, out) != UCS_OK)
        *failed = 1;
}

template <ucs_device_level_t level>
static void launch_at(struct rb_dev_plan *p, int op, size_t first, size_t count, size_t block, int grid, int threads,
                      cudaStream_t stream)
{
    switch (op) {
    case RB_DEV_PUT:
        ucx_put_blocks<level><<<grid, threads, 0, stream>>>(p->local, p->remote, p->offsets, p->remote_offsets,
                                                                first, count, block, p->failed);
        break;
    case RB_DEV_GET:
    case RB_DEV_CEILING_GET:
        copy_blocks<level><<<grid, threads, 0, stream>>>(p->pool, p->offsets, p->mapped, p->remote_offsets,
                                                             first, count, block);
        break;
    default:
        copy_blocks<level><<<grid, threads, 0, stream>>>(p->mapped, p->remote_offsets, p->pool, p->offsets,
                                                             first, count, block);
    }
}

/* The driver's context calls, found through the runtime (no link to libcuda: a machine that builds
 * this library need not have the driver): a green context is pushed around a posting launch. */
typedef CUresult (*push_context_t)(CUcontext);
typedef CUresult (*pop_context_t)(CUcontext *);
static push_context_t push_context;
static pop_context_t pop_context;

static int driver_calls(void)
{
    if (push_context == NULL)
        push_context = (push_context_t)driver_entry("cuCtxPushCurrent", 12000);
    if (pop_context == NULL)
        pop_context = (pop_context_t)driver_entry("cuCtxPopCurrent", 12000);
    return push_context != NULL && pop_context != NULL;
}

static void launch(struct rb_dev_plan *p, int op, size_t first, size_t count, size_t block)
{
    int posting = op == RB_DEV_PUT || op == RB_DEV_GET;
    int grid = posting ? p->post_grid : p->grid, threads = posting ? p->post_threads : THREADS;
    cudaStream_t stream = posting ? p->post_stream : p->stream;
    if (posting && p->post_ctx != NULL)
        push_context(p->post_ctx);
    size_t items = count * ((block + CHUNK - 1) / CHUNK);
    if (block <= WARP_ITEM) {
        size_t warps = (size_t)threads / WARP, blocks = (items + warps - 1) / warps;
        launch_at<UCS_DEVICE_LEVEL_WARP>(p, op, first, count, block, blocks < (size_t)grid ? (int)blocks : grid,
                                         threads, stream);
    } else {
        launch_at<UCS_DEVICE_LEVEL_BLOCK>(p, op, first, count, block, items < (size_t)grid ? (int)items : grid,
                                          threads, stream);
    }
    if (posting && p->post_ctx != NULL) {
        CUcontext popped;
        pop_context(&popped);
    }
}

extern "C" {

/* "name=value;" items: the codes as compiled (devapi.py checks them against its mirror). */
const char *rb_dev_abi(void)
{
    return "RB_DEV_OK=0;RB_DEV_TIMEOUT=1;RB_DEV_UCX=2;RB_DEV_CUDA=3;RB_DEV_NO_MEMORY=4;RB_DEV_UNSUPPORTED=5;"
           "RB_DEV_PUT=0;RB_DEV_GET=1;RB_DEV_CEILING_PUT=2;RB_DEV_CEILING_GET=3;RB_DEV_CE_PUT=4;RB_DEV_CE_GET=5;";
}

void rb_dev_release(rb_dev_plan *p)
{
    if (p == NULL)
        return;
    if (p->stream != NULL)
        cudaStreamSynchronize(p->stream);
    for (int t = 0; p->done != NULL && t < p->batch; t++)
        if (p->done[t] != NULL)
            cudaEventDestroy(p->done[t]);
    free(p->done);
    for (int t = 0; p->streams != NULL && t < p->batch; t++)
        if (p->streams[t] != NULL) {
            cudaStreamSynchronize(p->streams[t]);
            cudaStreamDestroy(p->streams[t]);
        }
    free(p->streams);
    free(p->host_offsets);
    free(p->host_remote_offsets);
    free(p->ce_dst);
    free(p->ce_src);
    free(p->ce_sizes);
    if (p->post_stream != NULL && p->post_stream != p->stream)
        cudaStreamSynchronize(p->post_stream); /* the partition's: released with it */
    if (p->stream != NULL)
        cudaStreamDestroy(p->stream);
    cudaFree(p->offsets);
    cudaFree(p->remote_offsets);
    cudaFree(p->failed);
    if (p->local != NULL)
        ucp_device_mem_list_release(p->local);
    if (p->remote != NULL)
        ucp_device_mem_list_release(p->remote);
    free(p);
}

/* UCX's two descriptor lists for one pool each side (one element: the whole pool; blocks are
 * offsets into it). The remote list needs the endpoint's wire-up finished: retried with progress. */
static int make_lists(rb_dev_plan *p, ucp_worker_h worker, ucp_ep_h ep, ucp_mem_h memh, size_t pool_bytes,
                      uint64_t remote_pool, ucp_rkey_h rkey, double timeout, int *ucx_status, char *why, size_t len)
{
    ucp_device_mem_list_elem_t element;
    memset(&element, 0, sizeof(element));
    element.field_mask = UCP_DEVICE_MEM_LIST_ELEM_FIELD_MEMH | UCP_DEVICE_MEM_LIST_ELEM_FIELD_RKEY |
                         UCP_DEVICE_MEM_LIST_ELEM_FIELD_LOCAL_ADDR | UCP_DEVICE_MEM_LIST_ELEM_FIELD_REMOTE_ADDR |
                         UCP_DEVICE_MEM_LIST_ELEM_FIELD_EP | UCP_DEVICE_MEM_LIST_ELEM_FIELD_LENGTH;
    element.memh = memh;
    element.local_addr = p->pool;
    element.length = pool_bytes;
    element.remote_addr = remote_pool;
    element.rkey = rkey;
    element.ep = ep;
    ucp_device_mem_list_params_t params;
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_DEVICE_MEM_LIST_PARAMS_FIELD_ELEMENTS | UCP_DEVICE_MEM_LIST_PARAMS_FIELD_ELEMENT_SIZE |
                        UCP_DEVICE_MEM_LIST_PARAMS_FIELD_NUM_ELEMENTS | UCP_DEVICE_MEM_LIST_PARAMS_FIELD_WORKER;
    params.element_size = sizeof(element);
    params.num_elements = 1;
    params.elements = &element;
    params.worker = worker;
    ucs_status_t status = ucp_device_local_mem_list_create(&params, &p->local);
    if (status != UCS_OK) {
        *ucx_status = status;
        snprintf(why, len, "UCX could not describe this rank's pool for the GPU: %s", ucs_status_string(status));
        return RB_DEV_UCX;
    }
    double until = now() + timeout;
    while ((status = ucp_device_remote_mem_list_create(&params, &p->remote)) == UCS_ERR_NOT_CONNECTED &&
           now() < until)
        ucp_worker_progress(worker);
    if (status != UCS_OK) {
        *ucx_status = status;
        snprintf(why, len, "UCX could not describe the peer's pool for the GPU (no device lane to it?): %s",
                 ucs_status_string(status));
        return RB_DEV_UCX;
    }
    return RB_DEV_OK;
}

static int upload(uint64_t **to, const uint64_t *from, size_t count, char *why, size_t len)
{
    if (cuda_failed(cudaMalloc((void **)to, count * sizeof(uint64_t)), "cudaMalloc of the block offsets", why, len))
        return RB_DEV_CUDA;
    if (cuda_failed(cudaMemcpy(*to, from, count * sizeof(uint64_t), cudaMemcpyHostToDevice), "copying the offsets",
                    why, len))
        return RB_DEV_CUDA;
    return RB_DEV_OK;
}

/* The peer's pool as UCX maps it (a kernel asks ucp_device_get_ptr), the GPU that holds it, and the
 * grid a transfer's kernel launches with. */
static int map_peer(rb_dev_plan *p, char *why, size_t len)
{
    void **slot = (void **)(p->failed + 2);
    mapped_pointer<<<1, 1, 0, p->stream>>>(p->remote, slot, p->failed);
    int failed = 0;
    if (cuda_failed(cudaStreamSynchronize(p->stream), "mapping the peer's pool", why, len) ||
        cuda_failed(cudaMemcpy(&failed, p->failed, sizeof(int), cudaMemcpyDeviceToHost), "copying a flag", why, len) ||
        cuda_failed(cudaMemcpy(&p->mapped, slot, sizeof(void *), cudaMemcpyDeviceToHost), "copying the peer's pointer",
                    why, len))
        return RB_DEV_CUDA;
    if (failed) {
        snprintf(why, len, "UCX gave no pointer to the peer's pool (its lane cannot map it)");
        return RB_DEV_UCX;
    }
    cudaPointerAttributes peer;
    p->peer_device = cudaPointerGetAttributes(&peer, p->mapped) == cudaSuccess ? peer.device : p->device;
    cudaGetLastError();
    cudaDeviceProp props;
    int device = 0;
    cudaGetDevice(&device);
    cudaGetDeviceProperties(&props, device);
    p->grid = props.multiProcessorCount * 8; /* enough blocks in flight to cover the copy latency */
    p->post_grid = p->grid;
    p->post_threads = THREADS;
    p->post_stream = p->stream;
    return RB_DEV_OK;
}

/* Everything a step needs, made once: the lists, the offsets on the GPU, the peer's mapped pool, a
 * stream and an event per transfer. `total` = blocks of a step; `batch` transfers of total/batch. */
int rb_dev_plan_create(ucp_worker_h worker, ucp_ep_h ep, ucp_mem_h memh, void *pool, size_t pool_bytes,
                       uint64_t remote_pool, ucp_rkey_h rkey, const uint64_t *offsets, const uint64_t *remote_offsets,
                       size_t total, int batch, double timeout, rb_dev_plan **out, int *ucx_status, char *why,
                       size_t len)
{
    if (batch < 1 || total % (size_t)batch != 0) {
        snprintf(why, len, "%zu blocks do not split into %d transfers of equal count", total, batch);
        return RB_DEV_UCX;
    }
    rb_dev_plan *p = (rb_dev_plan *)calloc(1, sizeof(rb_dev_plan));
    if (p == NULL)
        return no_memory(why, len);
    /* The GPU that holds the pool: this library's CUDA runtime is not the one that allocated it. */
    cudaPointerAttributes where;
    if (cuda_failed(cudaPointerGetAttributes(&where, pool), "finding the pool's GPU", why, len) ||
        cuda_failed(cudaSetDevice(where.device), "cudaSetDevice", why, len)) {
        free(p);
        return RB_DEV_CUDA;
    }
    p->pool = (char *)pool;
    p->total = total;
    p->batch = batch;
    p->device = where.device;
    p->ce_op = -1;
    *out = p;
    p->host_offsets = (uint64_t *)malloc(total * sizeof(uint64_t));
    p->host_remote_offsets = (uint64_t *)malloc(total * sizeof(uint64_t));
    p->streams = (cudaStream_t *)calloc((size_t)batch, sizeof(cudaStream_t));
    if (p->host_offsets == NULL || p->host_remote_offsets == NULL || p->streams == NULL)
        return no_memory(why, len);
    memcpy(p->host_offsets, offsets, total * sizeof(uint64_t));
    memcpy(p->host_remote_offsets, remote_offsets, total * sizeof(uint64_t));
    int rc = make_lists(p, worker, ep, memh, pool_bytes, remote_pool, rkey, timeout, ucx_status, why, len);
    if (rc != RB_DEV_OK)
        return rc;
    if ((rc = upload(&p->offsets, offsets, total, why, len)) != RB_DEV_OK ||
        (rc = upload(&p->remote_offsets, remote_offsets, total, why, len)) != RB_DEV_OK)
        return rc;
    /* `failed`: the count of refused puts, padding, then the mapped pointer (8-byte aligned). */
    if (cuda_failed(cudaMalloc((void **)&p->failed, 2 * sizeof(int) + sizeof(void *)), "cudaMalloc", why, len) ||
        cuda_failed(cudaMemset(p->failed, 0, 2 * sizeof(int) + sizeof(void *)), "cudaMemset", why, len) ||
        cuda_failed(cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking), "cudaStreamCreate", why, len))
        return RB_DEV_CUDA;
    p->done = (cudaEvent_t *)calloc((size_t)batch, sizeof(cudaEvent_t));
    if (p->done == NULL)
        return no_memory(why, len);
    for (int t = 0; t < batch; t++)
        if (cuda_failed(cudaEventCreateWithFlags(&p->done[t], cudaEventDisableTiming), "cudaEventCreate", why, len))
            return RB_DEV_CUDA;
    return map_peer(p, why, len);
}

/* The peer's pool as UCX maps it into this process (a device pointer: what an armed list copies to or
 * from, armed.cu). */
void *rb_dev_mapped(rb_dev_plan *p) { return p->mapped; }

/* Beside compute: posting kernels on at most `ctas` CUDA blocks of 1,024 threads (so at most that
 * many SMs; 0 = the whole GPU), and on `stream` in green context `ctx` where a partition gives them
 * (NULL: this plan's stream). */
int rb_dev_configure(rb_dev_plan *p, int ctas, void *stream, void *ctx)
{
    if (ctx != NULL && !driver_calls())
        return RB_DEV_UNSUPPORTED; /* no way to enter the green context: a runtime before CUDA 12.5 */
    p->post_grid = ctas > 0 ? ctas : p->grid;
    p->post_threads = ctas > 0 ? 1024 : THREADS;
    p->post_stream = stream != NULL ? (cudaStream_t)stream : p->stream;
    p->post_ctx = (CUcontext)ctx;
    return RB_DEV_OK;
}

/* The copy engines' arguments for every block of a step, for this block size and direction. */
static int ce_arguments(rb_dev_plan *p, int op, size_t block, char *why, size_t len)
{
    if (p->ce_dst == NULL) { /* all three or none: a failed allocation is tried again at the next step */
        void **dst = (void **)malloc(p->total * sizeof(void *)), **src = (void **)malloc(p->total * sizeof(void *));
        size_t *sizes = (size_t *)malloc(p->total * sizeof(size_t));
        if (dst == NULL || src == NULL || sizes == NULL) {
            free(dst);
            free(src);
            free(sizes);
            return no_memory(why, len);
        }
        p->ce_dst = dst;
        p->ce_src = src;
        p->ce_sizes = sizes;
    }
    for (int t = 0; t < p->batch; t++) /* a stream that failed to be made is tried again at the next step */
        if (p->streams[t] == NULL &&
            cuda_failed(cudaStreamCreateWithFlags(&p->streams[t], cudaStreamNonBlocking), "cudaStreamCreate", why, len))
            return RB_DEV_CUDA;
    if (p->ce_block == block && p->ce_op == op)
        return RB_DEV_OK;
    for (size_t i = 0; i < p->total; i++) {
        char *mine = p->pool + p->host_offsets[i], *theirs = p->mapped + p->host_remote_offsets[i];
        p->ce_dst[i] = op == RB_DEV_CE_PUT ? theirs : mine;
        p->ce_src[i] = op == RB_DEV_CE_PUT ? mine : theirs;
        p->ce_sizes[i] = block;
    }
    p->ce_block = block;
    p->ce_op = op;
    return RB_DEV_OK;
}

/* One transfer's blocks through the copy engines: one call, in stream order (batch_copy). */
static cudaError_t ce_post(rb_dev_plan *p, int op, size_t first, size_t count, cudaStream_t stream)
{
    int mine = p->device, theirs = p->peer_device, put = op == RB_DEV_CE_PUT;
    return batch_copy(p->ce_dst + first, p->ce_src + first, p->ce_sizes + first, count, put ? mine : theirs,
                      put ? theirs : mine, stream);
}

/* Why the copy engines' path cannot run here, or NULL: a CUDA 12.8 runtime (built in) and driver. */
const char *rb_dev_ce_unsupported(void) { return batch_copy_missing(); }

/* Whether UCX refused any device put of the last kernel (the count reset for the next). */
static int refused_puts(rb_dev_plan *p, char *why, size_t len)
{
    int failed = 0;
    cudaMemcpy(&failed, p->failed, sizeof(int), cudaMemcpyDeviceToHost);
    if (!failed)
        return RB_DEV_OK;
    snprintf(why, len, "UCX refused %d device put(s) of the list", failed);
    cudaMemset(p->failed, 0, sizeof(int));
    return RB_DEV_UCX;
}

/* One step: `batch` transfers of total/batch blocks, each one kernel launch and an event. Each
 * transfer's posting (the launch) and completion (its event, polled) from the start of its launch;
 * the step from the first launch to the last completion. */
int rb_dev_step(rb_dev_plan *p, int op, size_t block, double timeout, double *post_seconds, double *seconds,
                double *step_seconds, char *why, size_t len)
{
    size_t per = p->total / (size_t)p->batch;
    double *start = (double *)calloc((size_t)p->batch, sizeof(double));
    if (start == NULL)
        return no_memory(why, len);
    int rc = RB_DEV_OK, engines = op == RB_DEV_CE_PUT || op == RB_DEV_CE_GET;
    if (engines && rb_dev_ce_unsupported() != NULL) {
        free(start);
        snprintf(why, len, "%s", rb_dev_ce_unsupported());
        return RB_DEV_UNSUPPORTED;
    }
    if (engines && (rc = ce_arguments(p, op, block, why, len)) != RB_DEV_OK) {
        free(start);
        return rc;
    }
    double began = now();
    for (int t = 0; t < p->batch && rc == RB_DEV_OK; t++) {
        start[t] = now();
        if (engines) {
            if (cuda_failed(ce_post(p, op, (size_t)t * per, per, p->streams[t]), "cudaMemcpyBatchAsync", why, len))
                rc = RB_DEV_CUDA;
            if (rc == RB_DEV_OK && cuda_failed(cudaEventRecord(p->done[t], p->streams[t]), "cudaEventRecord", why, len))
                rc = RB_DEV_CUDA;
        } else {
            launch(p, op, (size_t)t * per, per, block);
            cudaStream_t stream = op == RB_DEV_PUT || op == RB_DEV_GET ? p->post_stream : p->stream;
            if (cuda_failed(cudaGetLastError(), "launching a block-list kernel", why, len) ||
                cuda_failed(cudaEventRecord(p->done[t], stream), "cudaEventRecord", why, len))
                rc = RB_DEV_CUDA;
        }
        post_seconds[t] = now() - start[t];
    }
    double until = began + timeout;
    for (int t = 0; t < p->batch && rc == RB_DEV_OK; t++) {
        cudaError_t err;
        while ((err = cudaEventQuery(p->done[t])) == cudaErrorNotReady) {
            if (now() > until) {
                snprintf(why, len, "the GPU had not finished a transfer after %.0f s", timeout);
                rc = RB_DEV_TIMEOUT;
                break;
            }
        }
        if (rc == RB_DEV_OK && cuda_failed(err, "a block-list kernel", why, len))
            rc = RB_DEV_CUDA;
        seconds[t] = now() - start[t];
    }
    *step_seconds = now() - began;
    free(start);
    return rc == RB_DEV_OK && op == RB_DEV_PUT ? refused_puts(p, why, len) : rc;
}

} /* extern "C" */
