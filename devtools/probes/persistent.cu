// A probe, not part of rdmabench: can a persistent copy kernel, resident before a GEMM starts and
// woken per list through host-mapped memory, move a KV block list from GPU 0 to GPU 1 fast beside a
// bf16 cuBLAS GEMM on GPU 0 without slowing it? (issue 38's "fewer SMs, held only while a list is in
// flight"). Prints one line per configuration: CTAs x threads of the resident kernel, block size,
// the list's GB/s alone and beside, the GEMM's TFLOP/s with no kernel resident, with the kernel
// resident but idle, and beside the transfers, each pair interleaved (alone, resident, beside) `pairs`
// times; medians, with the beside/alone slowdown's range.
//
// Build: nvcc -O3 -std=c++17 -arch=native -o persistent persistent.cu -lcublas
// Run:   ./persistent [pairs=5] [gemm M=8192]  (needs two GPUs with peer access)
#include <algorithm>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <vector>

#define CHECK(x)                                                                                                  \
    do {                                                                                                          \
        cudaError_t e_ = (x);                                                                                     \
        if (e_ != cudaSuccess) {                                                                                  \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                   \
            exit(1);                                                                                              \
        }                                                                                                         \
    } while (0)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// doorbell[0]: the list number to move (-1: exit); done[0]: lists finished (one count per CTA).
__global__ void __launch_bounds__(128) resident(volatile int *doorbell, int *done, const int4 *src, int4 *dst,
                                                const int *src_slot, const int *dst_slot, int blocks,
                                                int block_words)
{
    __shared__ int turn;
    for (int list = 1;; list++) {
        if (threadIdx.x == 0) {
            int seen;
            while ((seen = doorbell[0]) < list && seen >= 0)
                __nanosleep(200);
            turn = seen;
        }
        __syncthreads();
        if (turn < 0)
            return;
        for (int b = blockIdx.x; b < blocks; b += gridDim.x) {
            const int4 *from = src + (size_t)src_slot[b] * block_words;
            int4 *to = dst + (size_t)dst_slot[b] * block_words;
            for (int w = threadIdx.x; w < block_words; w += blockDim.x)
                to[w] = from[w];
        }
        __threadfence_system();
        __syncthreads();
        if (threadIdx.x == 0)
            atomicAdd_system(done, 1);
    }
}

__global__ void fill(__nv_bfloat16 *x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += gridDim.x * (size_t)blockDim.x)
        x[i] = __float2bfloat16((float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f);
}

struct Gemm {
    cublasHandle_t h;
    cudaStream_t s;
    __nv_bfloat16 *a, *b, *c;
    int m;
    cudaEvent_t e0, e1;
};

// ms of `count` GEMMs back to back (events around each; the median of them).
static double gemm_ms(Gemm &g, int count)
{
    std::vector<float> ms;
    float alpha = 1, beta = 0;
    for (int i = 0; i < count; i++) {
        cudaEventRecord(g.e0, g.s);
        cublasGemmEx(g.h, CUBLAS_OP_N, CUBLAS_OP_N, g.m, g.m, g.m, &alpha, g.a, CUDA_R_16BF, g.m, g.b, CUDA_R_16BF,
                     g.m, &beta, g.c, CUDA_R_16BF, g.m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        cudaEventRecord(g.e1, g.s);
        cudaEventSynchronize(g.e1);
        float t;
        cudaEventElapsedTime(&t, g.e0, g.e1);
        ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

struct Lists {
    volatile int *doorbell;
    int *done;
    int rung;
    int ctas;
};

// Ring `count` lists one after the other; the median seconds of one.
static double lists_s(Lists &l, int count)
{
    std::vector<double> s;
    for (int i = 0; i < count; i++) {
        double t0 = now();
        l.rung++;
        __atomic_store_n((int *)l.doorbell, l.rung, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(l.done, __ATOMIC_SEQ_CST) < l.rung * l.ctas)
            ;
        s.push_back(now() - t0);
    }
    std::sort(s.begin(), s.end());
    return s[s.size() / 2];
}

// Lists rung from a host thread while the GEMM runs on its stream: GEMM ms beside, list s beside.
struct Beside {
    Lists *l;
    volatile int stop;
    std::vector<double> s;
};

#include <pthread.h>
static void *ring(void *arg)
{
    Beside *b = (Beside *)arg;
    while (!b->stop)
        b->s.push_back(lists_s(*b->l, 1));
    return NULL;
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

// The GEMM on GPU 0: M x M x M in bf16 on a stream of its own, its operands filled, warmed up.
static void gemm_setup(Gemm &g, int m)
{
    g.m = m;
    size_t elems = (size_t)m * m;
    CHECK(cudaStreamCreateWithFlags(&g.s, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&g.a, elems * 2));
    CHECK(cudaMalloc(&g.b, elems * 2));
    CHECK(cudaMalloc(&g.c, elems * 2));
    fill<<<1024, 256>>>(g.a, elems);
    fill<<<1024, 256>>>(g.b, elems);
    cublasCreate(&g.h);
    cublasSetStream(g.h, g.s);
    cudaEventCreate(&g.e0);
    cudaEventCreate(&g.e1);
    CHECK(cudaDeviceSynchronize());
    gemm_ms(g, 20);  // warm
}

// A list of `blocks` blocks of `size` bytes: random slots of a pool 4x its size on GPU 0, moved to
// spread slots of a pool on GPU 1; the slot tables on GPU 0.
struct Pools {
    int size, blocks;
    int4 *src, *dst;
    int *src_slot, *dst_slot;
};

static Pools pools_make(int size, int blocks)
{
    Pools p{size, blocks, NULL, NULL, NULL, NULL};
    size_t pool = (size_t)blocks * 4 * size;
    CHECK(cudaMalloc(&p.src, pool));
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&p.dst, pool));
    CHECK(cudaSetDevice(0));
    std::vector<int> order(blocks * 4);
    for (int i = 0; i < blocks * 4; i++)
        order[i] = i;
    srand(7);
    std::vector<int> ss(blocks), ds(blocks);
    for (int i = 0; i < blocks; i++) {
        std::swap(order[i], order[i + rand() % (blocks * 4 - i)]);
        ss[i] = order[i];
    }
    for (int i = 0; i < blocks; i++)
        ds[i] = order[(i * 7 + 3) % (blocks * 4)];
    CHECK(cudaMalloc(&p.src_slot, blocks * sizeof(int)));
    CHECK(cudaMalloc(&p.dst_slot, blocks * sizeof(int)));
    CHECK(cudaMemcpy(p.src_slot, ss.data(), blocks * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(p.dst_slot, ds.data(), blocks * sizeof(int), cudaMemcpyHostToDevice));
    return p;
}

static void pools_free(Pools &p)
{
    cudaFree(p.src);
    cudaSetDevice(1);
    cudaFree(p.dst);
    cudaSetDevice(0);
    cudaFree(p.src_slot);
    cudaFree(p.dst_slot);
}

// The medians of one configuration's pairs (alone, resident, beside).
struct Pairs {
    std::vector<double> none, idle, besides, slow, alone_s, beside_s;
};

// One pair: the GEMM with no kernel resident, the kernel resident and the lists alone, the GEMM with
// it resident and idle, then beside the lists rung from a host thread, then idle again.
static void one_pair(Gemm &g, Pools &p, Lists &l, int *dflags, int ctas, int threads, Pairs &out)
{
    out.none.push_back(gemm_ms(g, 12));  // no kernel resident
    cudaStream_t ks;
    CHECK(cudaStreamCreateWithFlags(&ks, cudaStreamNonBlocking));
    resident<<<ctas, threads, 0, ks>>>((volatile int *)dflags, dflags + 8, p.src, p.dst, p.src_slot, p.dst_slot,
                                       p.blocks, p.size / 16);
    CHECK(cudaGetLastError());
    out.alone_s.push_back(lists_s(l, 20));  // resident, idle GPU otherwise
    out.idle.push_back(gemm_ms(g, 12));     // resident but idle
    Beside b{&l, 0, {}};
    pthread_t t;
    pthread_create(&t, NULL, ring, &b);
    double beside_ms = gemm_ms(g, 12);
    b.stop = 1;
    pthread_join(t, NULL);
    out.besides.push_back(beside_ms);
    out.beside_s.push_back(median(b.s));
    double after = gemm_ms(g, 12);  // the window after, kernel resident and idle
    out.slow.push_back(beside_ms / after);
    __atomic_store_n((int *)l.doorbell, -1, __ATOMIC_SEQ_CST);
    CHECK(cudaStreamSynchronize(ks));
    cudaStreamDestroy(ks);
}

// One configuration (CTAs x threads of the resident kernel), `pairs` pairs: its line.
static void configuration(Gemm &g, Pools &p, int ctas, int threads, int pairs)
{
    int *flags;
    CHECK(cudaHostAlloc(&flags, 64, cudaHostAllocMapped));
    flags[0] = 0;
    flags[8] = 0;
    int *dflags;
    CHECK(cudaHostGetDevicePointer(&dflags, flags, 0));
    Lists l{flags, flags + 8, 0, ctas};
    Pairs r;
    for (int i = 0; i < pairs; i++) {
        one_pair(g, p, l, dflags, ctas, threads, r);
        flags[0] = 0;
        flags[8] = 0;
        l.rung = 0;
    }
    double moved = (double)p.blocks * p.size, flops = 2.0 * g.m * (double)g.m * g.m;
    printf("%4d %7d %5dK %10.1f %10.1f %10.1f %9.1f %11.1f %18.3f[%.2f-%.2f] %7.3f %9.3f\n", ctas, threads,
           p.size / 1024, moved / median(r.alone_s) / 1e9, moved / median(r.beside_s) / 1e9,
           flops / median(r.none) / 1e9, flops / median(r.idle) / 1e9, flops / median(r.besides) / 1e9,
           median(r.slow), *std::min_element(r.slow.begin(), r.slow.end()),
           *std::max_element(r.slow.begin(), r.slow.end()), median(r.besides) / median(r.none),
           median(r.idle) / median(r.none));
    fflush(stdout);
    cudaFreeHost(flags);
}

int main(int argc, char **argv)
{
    int pairs = argc > 1 ? atoi(argv[1]) : 5;
    int m = argc > 2 ? atoi(argv[2]) : 8192;
    const int blocks = 1024;
    CHECK(cudaSetDevice(1));
    CHECK(cudaSetDevice(0));
    CHECK(cudaDeviceEnablePeerAccess(1, 0));
    CHECK(cudaSetDeviceFlags(cudaDeviceMapHost));
    Gemm g;
    gemm_setup(g, m);
    int sizes[] = {4096, 65536, 1 << 20};
    int shapes[][2] = {{1, 32}, {2, 32}, {4, 32}, {8, 32}, {16, 32}, {4, 128}, {8, 128}, {16, 128}, {32, 128}};
    printf("ctas threads block   alone_GBs beside_GBs  gemm_none gemm_idle gemm_beside TFLOP/s  slowdown[min-max]"
           " vs_none  idle_cost\n");
    for (int size : sizes) {
        Pools p = pools_make(size, blocks);
        for (auto &shape : shapes)
            configuration(g, p, shape[0], shape[1], pairs);
        pools_free(p);
    }
    return 0;
}
