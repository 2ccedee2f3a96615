/* What the CUDA libraries of rdmabench (devlists.cu, gpuload.cu) share: a monotonic clock and the one
 * line a failed CUDA runtime call becomes. Included by both; their build digests hash it too. */
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
