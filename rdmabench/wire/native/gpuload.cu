/* A model's compute beside a transfer: a load that keeps one GPU busy the way a serving engine's
 * prefill (a bf16 matrix product through cuBLAS) or decode (a kernel that streams HBM, as attention
 * over a KV cache does) keeps it, in its own stream, from a host thread of its own, so that the
 * rank's main thread stays free to time the transfer.
 *
 * The thread keeps DEPTH operations queued (the GPU never waits for the host) and times each with a
 * pair of events: an operation's time is its own run on the GPU, slowed by whatever shared the GPU
 * with it. The load's rate alone and beside a transfer come from the same operations on the same
 * buffers, so their ratio is the transfer's cost to the model.
 *
 * An SM partition (green contexts, CUDA 12.4+ driver): the GPU's SMs split into a group for the
 * transfer and the rest for the load; the transfer's stream comes from here, the load then runs in
 * the rest. A carve-out (rb_load_carve): the GEMM planned by cuBLASLt for SMs - N
 * (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, what PyTorch's _set_sm_carveout_experimental sets), on the
 * whole GPU's stream, N SMs left to the transfer's kernel. Built on first use with nvcc
 * (rdmabench/wire/gpuload.py), loaded through ctypes. */

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cudacommon.cuh"

#define RB_LOAD_OK 0
#define RB_LOAD_CUDA 1
#define RB_LOAD_NO_MEMORY 2
#define RB_LOAD_UNSUPPORTED 3

#define RB_LOAD_GEMM 0
#define RB_LOAD_DECODE 1

#define RB_LOAD_WHOLE 0   /* where a run's operations go: the whole GPU, */
#define RB_LOAD_PART 1    /* the partition's SMs, */
#define RB_LOAD_CARVED 2  /* or the carved GEMM's plan on the whole GPU's stream */
#define LT_WORKSPACE (32u << 20)

#define DEPTH 2      /* operations queued at once */
#define RING 65536   /* operation times kept between a start and a stop (the latest) */

struct rb_load {
    int device;
    int kind;
    size_t size;          /* GEMM: the matrix order; decode: bytes streamed per operation */
    double work;          /* flops (GEMM) or bytes (decode) per operation */
    void *a, *b, *c;      /* GEMM: A, B, C; decode: the buffer in a, one word per CUDA block in c */
    int grid;
    cudaStream_t whole;   /* the load on the whole GPU */
    cublasHandle_t blas_whole;
    /* The partition, where one was made: the load's green context and stream, the transfer's. */
    CUgreenCtx green_load, green_transfer;
    CUcontext ctx_load, ctx_transfer;
    CUstream part, transfer;
    cublasHandle_t blas_part;
    int load_sms, transfer_sms;
    /* The carve-out, where one was planned: cuBLASLt's handle, descriptors and the chosen algorithm. */
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t lt_desc;
    cublasLtMatrixLayout_t lt_layout;
    cublasLtMatmulAlgo_t lt_algo;
    void *lt_workspace;
    int carved_sms, sm_count;
    /* The running thread and what it measured. */
    pthread_t thread;
    volatile int running;
    int started;
    int where;            /* RB_LOAD_WHOLE, RB_LOAD_PART or RB_LOAD_CARVED: this run's operations */
    cudaEvent_t begin[DEPTH], end[DEPTH];
    double times[RING];   /* seconds of each operation, ring */
    volatile size_t done;
    double wall_began, wall;
    int error;
    char why[256];
};

/* Values in [-1, 1): a product of zeros runs faster than a model's does. */
__global__ void fill_bf16(__nv_bfloat16 *x, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += gridDim.x * (size_t)blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        x[i] = __float2bfloat16((float)(h & 0xFFFF) / 32768.0f - 1.0f);
    }
}

/* Attention decode's memory side: every byte of the cache read once, 16 bytes a load. */
__global__ void stream_hbm(const int4 *in, size_t words, int *out)
{
    int acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += gridDim.x * (size_t)blockDim.x) {
        int4 v = __ldcs(in + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x7fffffff) /* never true for the buffer's zeros: keeps the loads alive */
        out[blockIdx.x] = acc;
}

/* The carved GEMM: the same product through cuBLASLt, planned for the SMs the carve-out leaves. */
static int carved_operation(rb_load *l, cudaStream_t stream)
{
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t s = cublasLtMatmul(l->lt, l->lt_desc, &one, l->a, l->lt_layout, l->b, l->lt_layout, &zero, l->c,
                                      l->lt_layout, l->c, l->lt_layout, &l->lt_algo, l->lt_workspace, LT_WORKSPACE,
                                      stream);
    if (s != CUBLAS_STATUS_SUCCESS) {
        snprintf(l->why, sizeof(l->why), "cublasLtMatmul failed (status %d)", (int)s);
        return RB_LOAD_CUDA;
    }
    return RB_LOAD_OK;
}

static int operation(rb_load *l, cudaStream_t stream, cublasHandle_t blas)
{
    if (l->where == RB_LOAD_CARVED)
        return carved_operation(l, stream);
    if (l->kind == RB_LOAD_GEMM) {
        const float one = 1.0f, zero = 0.0f;
        int n = (int)l->size;
        cublasStatus_t s = cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, l->a, CUDA_R_16BF, n, l->b,
                                        CUDA_R_16BF, n, &zero, l->c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                                        CUBLAS_GEMM_DEFAULT);
        if (s != CUBLAS_STATUS_SUCCESS) {
            snprintf(l->why, sizeof(l->why), "cublasGemmEx failed (status %d)", (int)s);
            return RB_LOAD_CUDA;
        }
        return RB_LOAD_OK;
    }
    stream_hbm<<<l->grid, 512, 0, stream>>>((const int4 *)l->a, l->size / 16, (int *)l->c);
    return cuda_failed(cudaGetLastError(), "the decode kernel", l->why, sizeof(l->why)) ? RB_LOAD_CUDA : RB_LOAD_OK;
}

/* An operation's GPU time into the ring; a failed wait or reading ends the run with why (a GPU fault
 * is sticky: every later operation would fail too, and an operation never timed is no figure). */
static void record(rb_load *l, int slot)
{
    float ms = 0;
    if (l->error)
        return; /* the first failure is the one to say */
    if (cuda_failed(cudaEventSynchronize(l->end[slot]), "waiting for a load operation", l->why, sizeof(l->why)) ||
        cuda_failed(cudaEventElapsedTime(&ms, l->begin[slot], l->end[slot]), "timing a load operation", l->why,
                    sizeof(l->why))) {
        l->error = 1;
        return;
    }
    l->times[l->done % RING] = 1e-3 * ms;
    l->done++;
}

/* The thread: DEPTH operations queued, each timed by its own events, until told to stop. */
static void *run(void *arg)
{
    rb_load *l = (rb_load *)arg;
    int partitioned = l->where == RB_LOAD_PART;
    cudaStream_t stream = partitioned ? (cudaStream_t)l->part : l->whole;
    cublasHandle_t blas = partitioned ? l->blas_part : l->blas_whole;
    if (partitioned)
        cuCtxSetCurrent(l->ctx_load);
    else
        cudaSetDevice(l->device);
    size_t issued = 0;
    while (l->running && !l->error) {
        int slot = (int)(issued % DEPTH);
        if (issued >= DEPTH) {
            record(l, slot);
            if (l->error)
                break; /* before another operation could say a later failure instead */
        }
        cudaEventRecord(l->begin[slot], stream);
        if (operation(l, stream, blas) != RB_LOAD_OK) {
            l->error = 1;
            break;
        }
        cudaEventRecord(l->end[slot], stream);
        issued++;
    }
    for (size_t i = issued > DEPTH ? issued - DEPTH : 0; i < issued; i++)
        record(l, (int)(i % DEPTH));
    return NULL;
}

static void release_carve(rb_load *l)
{
    if (l->lt_desc != NULL)
        cublasLtMatmulDescDestroy(l->lt_desc);
    if (l->lt_layout != NULL)
        cublasLtMatrixLayoutDestroy(l->lt_layout);
    if (l->lt != NULL)
        cublasLtDestroy(l->lt);
    cudaFree(l->lt_workspace);
    l->lt_desc = NULL;
    l->lt_layout = NULL;
    l->lt = NULL;
    l->lt_workspace = NULL;
    l->carved_sms = 0;
}

static int lt_failed(cublasStatus_t s, const char *what, char *why, size_t len)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return 0;
    snprintf(why, len, "%s failed (cuBLAS status %d)", what, (int)s);
    return 1;
}

/* cuBLASLt's plan of the GEMM for `target` SMs: its descriptors and the heuristic's first algorithm. */
static int plan_carve(rb_load *l, int target, char *why, size_t len)
{
    int n = (int)l->size;
    int32_t sms = target;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t found;
    int results = 0;
    size_t workspace = LT_WORKSPACE;
    memset(&found, 0, sizeof(found));
    if (lt_failed(cublasLtCreate(&l->lt), "cublasLtCreate", why, len) ||
        lt_failed(cublasLtMatmulDescCreate(&l->lt_desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate",
                  why, len) ||
        lt_failed(cublasLtMatmulDescSetAttribute(l->lt_desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms, sizeof(sms)),
                  "setting CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET", why, len) ||
        lt_failed(cublasLtMatrixLayoutCreate(&l->lt_layout, CUDA_R_16BF, n, n, n), "cublasLtMatrixLayoutCreate", why,
                  len) ||
        lt_failed(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate", why, len))
        return RB_LOAD_CUDA;
    int rc = RB_LOAD_OK;
    if (lt_failed(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                       sizeof(workspace)),
                  "setting cuBLASLt's workspace", why, len) ||
        lt_failed(cublasLtMatmulAlgoGetHeuristic(l->lt, l->lt_desc, l->lt_layout, l->lt_layout, l->lt_layout,
                                                 l->lt_layout, pref, 1, &found, &results),
                  "cublasLtMatmulAlgoGetHeuristic", why, len))
        rc = RB_LOAD_CUDA;
    else if (results < 1) {
        snprintf(why, len, "cuBLASLt has no algorithm for a bf16 %d^3 GEMM on %d SMs", n, target);
        rc = RB_LOAD_UNSUPPORTED;
    }
    cublasLtMatmulPreferenceDestroy(pref);
    if (rc == RB_LOAD_OK)
        l->lt_algo = found.algo;
    return rc;
}

extern "C" {

const char *rb_load_abi(void)
{
    return "RB_LOAD_OK=0;RB_LOAD_CUDA=1;RB_LOAD_NO_MEMORY=2;RB_LOAD_UNSUPPORTED=3;RB_LOAD_GEMM=0;RB_LOAD_DECODE=1;"
           "RING=65536;RB_LOAD_WHOLE=0;RB_LOAD_PART=1;RB_LOAD_CARVED=2;";
}

void rb_load_release(rb_load *l)
{
    if (l == NULL)
        return;
    if (l->started) {
        l->running = 0;
        pthread_join(l->thread, NULL);
    }
    cudaSetDevice(l->device);
    if (l->whole != NULL)
        cudaStreamSynchronize(l->whole);
    if (l->part != NULL)
        cuStreamSynchronize(l->part);
    for (int i = 0; i < DEPTH; i++) {
        if (l->begin[i] != NULL)
            cudaEventDestroy(l->begin[i]);
        if (l->end[i] != NULL)
            cudaEventDestroy(l->end[i]);
    }
    if (l->blas_whole != NULL)
        cublasDestroy(l->blas_whole);
    release_carve(l);
    if (l->blas_part != NULL) {
        cuCtxSetCurrent(l->ctx_load);
        cublasDestroy(l->blas_part);
        cudaSetDevice(l->device);
    }
    if (l->part != NULL)
        cuStreamDestroy(l->part);
    if (l->transfer != NULL)
        cuStreamDestroy(l->transfer);
    if (l->green_load != NULL)
        cuGreenCtxDestroy(l->green_load);
    if (l->green_transfer != NULL)
        cuGreenCtxDestroy(l->green_transfer);
    if (l->whole != NULL)
        cudaStreamDestroy(l->whole);
    cudaFree(l->a);
    cudaFree(l->b);
    cudaFree(l->c);
    free(l);
}

/* The load's buffers on `device` (GEMM: three size x size bf16 matrices; decode: `size` bytes). */
int rb_load_create(int device, int kind, size_t size, rb_load **out, char *why, size_t len)
{
    rb_load *l = (rb_load *)calloc(1, sizeof(rb_load));
    if (l == NULL) {
        snprintf(why, len, "out of host memory for the compute load");
        return RB_LOAD_NO_MEMORY;
    }
    *out = l;
    l->device = device;
    l->kind = kind;
    l->size = size;
    if (cuda_failed(cudaSetDevice(device), "cudaSetDevice", why, len) ||
        cuda_failed(cudaStreamCreateWithFlags(&l->whole, cudaStreamNonBlocking), "cudaStreamCreate", why, len))
        return RB_LOAD_CUDA;
    for (int i = 0; i < DEPTH; i++)
        if (cuda_failed(cudaEventCreateWithFlags(&l->begin[i], cudaEventBlockingSync), "cudaEventCreate", why, len) ||
            cuda_failed(cudaEventCreateWithFlags(&l->end[i], cudaEventBlockingSync), "cudaEventCreate", why, len))
            return RB_LOAD_CUDA;
    cudaDeviceProp props;
    if (cuda_failed(cudaGetDeviceProperties(&props, device), "cudaGetDeviceProperties", why, len))
        return RB_LOAD_CUDA;
    l->grid = props.multiProcessorCount * 4;
    l->sm_count = props.multiProcessorCount;
    if (kind == RB_LOAD_GEMM) {
        size_t bytes = size * size * sizeof(__nv_bfloat16);
        l->work = 2.0 * (double)size * (double)size * (double)size;
        if (cuda_failed(cudaMalloc(&l->a, bytes), "cudaMalloc of the GEMM's A", why, len) ||
            cuda_failed(cudaMalloc(&l->b, bytes), "cudaMalloc of the GEMM's B", why, len) ||
            cuda_failed(cudaMalloc(&l->c, bytes), "cudaMalloc of the GEMM's C", why, len))
            return RB_LOAD_NO_MEMORY;
        fill_bf16<<<l->grid, 256, 0, l->whole>>>((__nv_bfloat16 *)l->a, size * size, 0x6b76u);
        fill_bf16<<<l->grid, 256, 0, l->whole>>>((__nv_bfloat16 *)l->b, size * size, 0x1d2fu);
        if (cublasCreate(&l->blas_whole) != CUBLAS_STATUS_SUCCESS) {
            snprintf(why, len, "cublasCreate failed");
            return RB_LOAD_CUDA;
        }
        cublasSetStream(l->blas_whole, l->whole);
    } else {
        l->work = (double)(size / 16 * 16);
        if (cuda_failed(cudaMalloc(&l->a, size), "cudaMalloc of the decode's cache", why, len) ||
            cuda_failed(cudaMalloc(&l->c, (size_t)l->grid * sizeof(int)), "cudaMalloc", why, len))
            return RB_LOAD_NO_MEMORY;
        cudaMemsetAsync(l->a, 0, size, l->whole);
    }
    if (cuda_failed(cudaStreamSynchronize(l->whole), "preparing the compute load", why, len))
        return RB_LOAD_CUDA;
    return RB_LOAD_OK;
}

/* Split the GPU's SMs: `sms` (rounded up to what the GPU can split: 8 on Hopper) for the transfer,
 * the rest for the load. Returns the transfer's stream and context, and both SM counts. */
int rb_load_partition(rb_load *l, int sms, void **transfer_stream, void **transfer_ctx, int *transfer_sms,
                      int *load_sms, char *why, size_t len)
{
    CUdevice dev;
    CUdevResource all, groups[1], rest;
    unsigned int count = 1;
    if (driver_failed(cuDeviceGet(&dev, l->device), "cuDeviceGet", why, len) ||
        driver_failed(cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM), "cuDeviceGetDevResource", why, len))
        return RB_LOAD_UNSUPPORTED;
    memset(groups, 0, sizeof(groups));
    memset(&rest, 0, sizeof(rest));
    if (driver_failed(cuDevSmResourceSplitByCount(groups, &count, &all, &rest, 0, (unsigned int)sms),
                      "splitting the GPU's SMs (cuDevSmResourceSplitByCount)", why, len))
        return RB_LOAD_UNSUPPORTED;
    if (count < 1 || rest.sm.smCount == 0) {
        snprintf(why, len, "the GPU's %u SMs cannot give %d to the transfer and keep some for the load",
                 all.sm.smCount, sms);
        return RB_LOAD_UNSUPPORTED;
    }
    CUdevResourceDesc transfer_desc, load_desc;
    if (driver_failed(cuDevResourceGenerateDesc(&transfer_desc, groups, 1), "cuDevResourceGenerateDesc", why, len) ||
        driver_failed(cuDevResourceGenerateDesc(&load_desc, &rest, 1), "cuDevResourceGenerateDesc", why, len) ||
        driver_failed(cuGreenCtxCreate(&l->green_transfer, transfer_desc, dev, CU_GREEN_CTX_DEFAULT_STREAM),
                      "cuGreenCtxCreate", why, len) ||
        driver_failed(cuGreenCtxCreate(&l->green_load, load_desc, dev, CU_GREEN_CTX_DEFAULT_STREAM),
                      "cuGreenCtxCreate", why, len) ||
        driver_failed(cuCtxFromGreenCtx(&l->ctx_transfer, l->green_transfer), "cuCtxFromGreenCtx", why, len) ||
        driver_failed(cuCtxFromGreenCtx(&l->ctx_load, l->green_load), "cuCtxFromGreenCtx", why, len) ||
        driver_failed(cuGreenCtxStreamCreate(&l->transfer, l->green_transfer, CU_STREAM_NON_BLOCKING, 0),
                      "cuGreenCtxStreamCreate", why, len) ||
        driver_failed(cuGreenCtxStreamCreate(&l->part, l->green_load, CU_STREAM_NON_BLOCKING, 0),
                      "cuGreenCtxStreamCreate", why, len))
        return RB_LOAD_UNSUPPORTED;
    if (l->kind == RB_LOAD_GEMM) {
        cuCtxSetCurrent(l->ctx_load);
        cublasStatus_t s = cublasCreate(&l->blas_part);
        if (s == CUBLAS_STATUS_SUCCESS)
            cublasSetStream(l->blas_part, (cudaStream_t)l->part);
        cudaSetDevice(l->device);
        if (s != CUBLAS_STATUS_SUCCESS) {
            snprintf(why, len, "cublasCreate in the load's green context failed");
            return RB_LOAD_CUDA;
        }
    }
    l->transfer_sms = (int)groups[0].sm.smCount;
    l->load_sms = (int)rest.sm.smCount;
    *transfer_stream = (void *)l->transfer;
    *transfer_ctx = (void *)l->ctx_transfer;
    *transfer_sms = l->transfer_sms;
    *load_sms = l->load_sms;
    return RB_LOAD_OK;
}

/* Plan the GEMM for the GPU's SMs less `sms` (cuBLASLt's SM-count target), for runs started with
 * RB_LOAD_CARVED; the transfer's kernel is left the `sms` others. Again with another count: planned anew. */
int rb_load_carve(rb_load *l, int sms, char *why, size_t len)
{
    if (l->kind != RB_LOAD_GEMM) {
        snprintf(why, len, "a carve-out plans the GEMM for fewer SMs: the decode load has no GEMM");
        return RB_LOAD_UNSUPPORTED;
    }
    if (l->started) {
        snprintf(why, len, "the compute load is running: stop it before carving SMs from it");
        return RB_LOAD_CUDA;
    }
    if (sms < 1 || sms >= l->sm_count) {
        snprintf(why, len, "a carve-out of %d SMs leaves the GEMM none of the GPU's %d", sms, l->sm_count);
        return RB_LOAD_UNSUPPORTED;
    }
    if (l->carved_sms == sms)
        return RB_LOAD_OK;
    release_carve(l);
    if (cuda_failed(cudaSetDevice(l->device), "cudaSetDevice", why, len))
        return RB_LOAD_CUDA;
    if (cuda_failed(cudaMalloc(&l->lt_workspace, LT_WORKSPACE), "cudaMalloc of cuBLASLt's workspace", why, len))
        return RB_LOAD_NO_MEMORY;
    int rc = plan_carve(l, l->sm_count - sms, why, len);
    if (rc != RB_LOAD_OK) {
        release_carve(l);
        return rc;
    }
    l->carved_sms = sms;
    return RB_LOAD_OK;
}

/* The GPU's SMs, all of them (what a carve-out is taken from). */
int rb_load_sm_count(rb_load *l) { return l->sm_count; }

double rb_load_work(rb_load *l) { return l->work; }

/* Operations finished since the start (read while the thread runs: a count, not a lock). */
size_t rb_load_done(rb_load *l) { return l->done; }

/* Whether the running operations ended on an error (rb_load_stop says which). */
int rb_load_failed(rb_load *l) { return l->error; }

/* Start the operations `where`: RB_LOAD_WHOLE (the whole GPU), RB_LOAD_PART (the partition's SMs) or
 * RB_LOAD_CARVED (the GEMM planned for the SMs rb_load_carve left it). */
int rb_load_start(rb_load *l, int where, char *why, size_t len)
{
    if (l->started) {
        snprintf(why, len, "the compute load is running already");
        return RB_LOAD_CUDA;
    }
    if (where == RB_LOAD_PART && l->part == NULL) {
        snprintf(why, len, "no SM partition was made for the compute load");
        return RB_LOAD_UNSUPPORTED;
    }
    if (where == RB_LOAD_CARVED && l->carved_sms == 0) {
        snprintf(why, len, "no carve-out was planned for the compute load");
        return RB_LOAD_UNSUPPORTED;
    }
    if (where < RB_LOAD_WHOLE || where > RB_LOAD_CARVED) {
        snprintf(why, len, "no such place for the compute load's operations: %d", where);
        return RB_LOAD_UNSUPPORTED;
    }
    l->where = where;
    l->done = 0;
    l->error = 0;
    l->running = 1;
    l->wall_began = now();
    if (pthread_create(&l->thread, NULL, run, l) != 0) {
        l->running = 0;
        snprintf(why, len, "cannot start the compute load's thread");
        return RB_LOAD_NO_MEMORY;
    }
    l->started = 1;
    return RB_LOAD_OK;
}

/* Stop the operations: every operation's seconds since the start (the latest RING), their count, the
 * wall seconds of the run. */
int rb_load_stop(rb_load *l, double *times, size_t cap, size_t *count, double *wall, char *why, size_t len)
{
    if (!l->started) {
        snprintf(why, len, "the compute load was not started");
        return RB_LOAD_CUDA;
    }
    l->running = 0;
    pthread_join(l->thread, NULL);
    l->started = 0;
    *wall = now() - l->wall_began;
    size_t kept = l->done < RING ? l->done : RING;
    size_t first = l->done - kept;
    *count = kept < cap ? kept : cap;
    for (size_t i = 0; i < *count; i++)
        times[i] = l->times[(first + i) % RING];
    if (l->error) {
        snprintf(why, len, "%s", l->why);
        return RB_LOAD_CUDA;
    }
    return RB_LOAD_OK;
}

} /* extern "C" */
