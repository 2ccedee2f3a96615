/* What the CUDA libraries of rdmabench (devlists.cu, gpuload.cu, armed.cu) share: a monotonic clock,
 * the one line a failed CUDA runtime or driver call becomes, a driver call found through the runtime,
 * and one cudaMemcpyBatchAsync of a list of copies between two GPUs (with why it cannot run here).
 * Included by each; their build digests hash it too. What a library may leave unused is static inline
 * (no unused-function warning). */
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cuda_failed(cudaError_t err, const char *what, char *why, size_t len)
{
    if (err == cudaSuccess)
        return 0;
    snprintf(why, len, "%s: %s", what, cudaGetErrorString(err));
    return 1;
}

/* The driver's `name` as of CUDA `version` (12000: 12.0's signature), found through the runtime, so
 * that a library need not link libcuda (a machine that builds it need not have the driver); NULL
 * where the runtime (before 12.5) or the driver cannot give it. */
static inline void *driver_entry(const char *name, unsigned int version)
{
#if CUDART_VERSION >= 12050
    cudaDriverEntryPointQueryResult found;
    void *call = NULL;
    if (cudaGetDriverEntryPointByVersion(name, &call, version, cudaEnableDefault, &found) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess)
        return call;
#else
    (void)name, (void)version;
#endif
    return NULL;
}

/* A failed driver call as one line: `what` and the driver's name for the error (cuGetErrorString,
 * found through the runtime: no link to libcuda needed), else its number. */
static inline int driver_failed(CUresult err, const char *what, char *why, size_t len)
{
    typedef CUresult (*error_string_t)(CUresult, const char **);
    static error_string_t error_string;
    if (err == CUDA_SUCCESS)
        return 0;
    if (error_string == NULL)
        error_string = (error_string_t)driver_entry("cuGetErrorString", 12000);
    const char *name = NULL;
    if (error_string == NULL || error_string(err, &name) != CUDA_SUCCESS || name == NULL)
        snprintf(why, len, "%s: CUDA driver error %d", what, (int)err);
    else
        snprintf(why, len, "%s: %s", what, name);
    return 1;
}

/* Why cudaMemcpyBatchAsync cannot run here, or NULL: it needs a CUDA 12.8 runtime (built in) and
 * driver. */
static inline const char *batch_copy_missing(void)
{
    static char why[200];
    int driver = 0;
    cudaDriverGetVersion(&driver);
    if (CUDART_VERSION < 12080)
        snprintf(why, sizeof(why), "cudaMemcpyBatchAsync needs a CUDA 12.8 runtime; this library was built with %d",
                 CUDART_VERSION);
    else if (driver == 0)
        snprintf(why, sizeof(why), "no CUDA driver here (no GPU?)");
    else if (driver < 12080)
        snprintf(why, sizeof(why), "cudaMemcpyBatchAsync needs a CUDA 12.8 driver; this one is %d", driver);
    else
        return NULL;
    return why;
}

/* `count` copies src[i] -> dst[i] of sizes[i] bytes, device memory of GPU `from` into GPU `to` (-1: pinned
 * host memory, an offload's end), as one cudaMemcpyBatchAsync on `stream`: the sources read in stream order (after what the stream waits
 * for), the copy engines preferred over SMs. cudaErrorNotSupported from a runtime before 12.8. */
static inline cudaError_t batch_copy(void **dst, void **src, size_t *sizes, size_t count, int from, int to,
                                     cudaStream_t stream)
{
#if CUDART_VERSION >= 12080
    cudaMemcpyAttributes attr;
    memset(&attr, 0, sizeof(attr));
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
    attr.srcLocHint.type = from < 0 ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    attr.dstLocHint.type = to < 0 ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    attr.srcLocHint.id = from < 0 ? 0 : from;
    attr.dstLocHint.id = to < 0 ? 0 : to;
    size_t index = 0;
#if CUDART_VERSION >= 13000
    return cudaMemcpyBatchAsync((void *const *)dst, (const void *const *)src, sizes, count, &attr, &index, 1, stream);
#else
    size_t failed = 0;
    return cudaMemcpyBatchAsync(dst, src, sizes, count, &attr, &index, 1, &failed, stream);
#endif
#else
    (void)dst, (void)src, (void)sizes, (void)count, (void)from, (void)to, (void)stream;
    return cudaErrorNotSupported;
#endif
}
