/* What the CUDA libraries of rdmabench (devlists.cu, gpuload.cu, armed.cu) share: a monotonic clock,
 * the one line a failed CUDA runtime call becomes, and a driver call found through the runtime.
 * Included by each; their build digests hash it too. */
#pragma once

#include <cuda_runtime.h>
#include <stdio.h>
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
