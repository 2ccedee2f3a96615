/* Copy engines armed ahead of the data (a posting path of postings.py): a serving engine knows a request's
 * block table long before the KV cache is ready, so a list's copies can be submitted early and held on
 * the GPU until the data is.
 *
 * Arming a list (outside the timed step): on a stream of its own, cuStreamWaitValue32 on a 32-bit
 * flag in this GPU's memory (never another GPU's: CUDA 13.1's stream writes cannot reach it; never
 * host-mapped: such flags were not released on the lent VMs), then one cudaMemcpyBatchAsync of every
 * block (stream order, overlap with compute preferred), then an event. Releasing (inside the step):
 * cuStreamWriteValue32 of the flag from another stream; the list has landed when its event has. A
 * list's time is from the release (an event recorded just before the write) to its event. A release
 * may be launched and landed apart (rb_arm_launch, rb_arm_land), so that the next step of one wave is
 * armed while this one flies: arming costs about a microsecond of CPU a copy, longer than a 4 KiB or
 * 64 KiB list takes to land, and back-to-back steps would otherwise leave the engines idle while it runs.
 *
 * Armed copies are held in the GPU's queues: one stream held about 20,000, and arming 30,000 blocked
 * the submitting thread before it could release them (a deadlock). So a plan arms at most
 * RB_ARM_BOUND copies at once, over all its streams: a step's copies (list after list) are cut into
 * waves of at most the bound; the first wave is armed ahead, the later ones are submitted behind the
 * release (their CPU time is then inside the step). A stream's wait holds its hardware queue, and
 * CUDA gives a context 8 queues by default (CUDA_DEVICE_MAX_CONNECTIONS), shared round-robin by its
 * streams in the order they are made: a plan makes its release stream and at most RB_ARM_STREAMS
 * list streams one after the other, so that the release never queues behind a wait (lists beyond
 * RB_ARM_STREAMS share streams, in stream order).
 *
 * Built on first use with nvcc (rdmabench/wire/armed.py), loaded through ctypes. The driver's
 * stream-memory calls come through the runtime (driver_entry): no link to libcuda. Errors come back
 * as a code and one line of text. */

#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudacommon.cuh"

#define RB_ARM_OK 0
#define RB_ARM_TIMEOUT 1
#define RB_ARM_CUDA 2
#define RB_ARM_NO_MEMORY 3
#define RB_ARM_UNSUPPORTED 4
#define RB_ARM_ARGUMENT 5

#define RB_ARM_PUT 0 /* this GPU's blocks into the peer's */
#define RB_ARM_GET 1 /* the peer's blocks into this GPU's */

#define RB_ARM_BOUND 8192 /* most copies a plan holds armed at once, over all its streams */
#define RB_ARM_STREAMS 7  /* most list streams of a plan: with its release stream, CUDA's 8 queues */

typedef CUresult (*wait_value_t)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
typedef CUresult (*write_value_t)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
static wait_value_t wait_value;
static write_value_t write_value;

/* A run of one list's copies within one wave, on one stream, with the event it lands on. */
struct rb_arm_chunk {
    size_t first, count; /* copies [first, first + count) of the step */
    int list, wave, stream;
    cudaEvent_t landed[2]; /* by the generation's parity: the next step may be armed while this one flies */
};

struct rb_arm_plan {
    int direction;
    int device, peer;   /* the GPU whose streams and flag these are; the other end's GPU */
    size_t total;       /* copies of a step: `lists` lists of total / lists */
    int lists;
    size_t bound;       /* most copies armed at once (at most RB_ARM_BOUND) */
    void **dst, **src;  /* every copy's ends and size, host copies */
    size_t *sizes;
    uint32_t *flag;     /* this GPU's memory */
    uint32_t generation; /* the value the armed waves wait for */
    cudaStream_t release, streams[RB_ARM_STREAMS];
    int nstreams;
    cudaEvent_t released[2]; /* by the generation's parity, as the chunks' events */
    struct rb_arm_chunk *chunks;
    size_t nchunks;
    int waves;
    int armed;          /* the first wave is armed and not yet released */
    int flying;         /* a generation is released and not yet seen landed */
    uint32_t flown;     /* that generation */
    double launched_at; /* the host's clock at its release */
    int stuck;          /* a release timed out: the streams may wait for ever, teardown must not */
};

static int arm_no_memory(char *why, size_t len)
{
    snprintf(why, len, "out of host memory for an armed list");
    return RB_ARM_NO_MEMORY;
}

/* Why this library cannot arm anything anywhere, or NULL: the batch API (a CUDA 12.8 runtime and
 * driver) and the driver's stream-memory calls. */
static const char *missing(void)
{
    const char *why = batch_copy_missing();
    if (why != NULL)
        return why;
    if (wait_value == NULL)
        wait_value = (wait_value_t)driver_entry("cuStreamWaitValue32", 12000);
    if (write_value == NULL)
        write_value = (write_value_t)driver_entry("cuStreamWriteValue32", 12000);
    if (wait_value != NULL && write_value != NULL)
        return NULL;
    return "the CUDA driver gives no cuStreamWaitValue32/cuStreamWriteValue32";
}

/* The flag written, then waited for, on `stream`: a driver or GPU without stream memory operations
 * refuses one of the two (CUDA_ERROR_NOT_SUPPORTED). Never blocks: the wait is satisfied already. */
static int probe_memops(cudaStream_t stream, uint32_t *flag, char *why, size_t len)
{
    CUdeviceptr at = (CUdeviceptr)(uintptr_t)flag;
    if (driver_failed(write_value((CUstream)stream, at, 0, 0), "cuStreamWriteValue32 (a stream memory operation)", why,
                      len) ||
        driver_failed(wait_value((CUstream)stream, at, 0, CU_STREAM_WAIT_VALUE_GEQ),
                      "cuStreamWaitValue32 (a stream memory operation)", why, len))
        return RB_ARM_UNSUPPORTED;
    return cuda_failed(cudaStreamSynchronize(stream), "the stream-memory probe", why, len) ? RB_ARM_CUDA : RB_ARM_OK;
}

/* How copies `at` onward of one list (ending at `end`) go into waves of `bound`: chunk k of the list
 * runs to the next wave's edge. Counts chunks, and fills `out` where given. */
static size_t cut_list(size_t at, size_t end, int list, size_t bound, struct rb_arm_chunk *out)
{
    size_t n = 0;
    while (at < end) {
        size_t edge = (at / bound + 1) * bound, stop = edge < end ? edge : end;
        if (out != NULL) {
            out[n].first = at;
            out[n].count = stop - at;
            out[n].list = list;
            out[n].wave = (int)(at / bound);
            out[n].stream = list % RB_ARM_STREAMS;
            out[n].landed[0] = out[n].landed[1] = NULL;
        }
        n++;
        at = stop;
    }
    return n;
}

/* One chunk's copies as one batch on its list's stream (batch_copy: in stream order, after the wait). */
static cudaError_t post_chunk(struct rb_arm_plan *p, const struct rb_arm_chunk *c)
{
    int mine = p->device, theirs = p->peer, put = p->direction == RB_ARM_PUT;
    return batch_copy(p->dst + c->first, p->src + c->first, p->sizes + c->first, c->count, put ? mine : theirs,
                      put ? theirs : mine, p->streams[c->stream]);
}

/* Wave `wave`'s chunks: each stream waits once for the flag to reach `generation`, then each chunk
 * is one batch and its event (of the generation's parity). */
static int arm_wave(struct rb_arm_plan *p, int wave, uint32_t generation, char *why, size_t len)
{
    int waited[RB_ARM_STREAMS] = {0};
    CUdeviceptr flag = (CUdeviceptr)(uintptr_t)p->flag;
    for (size_t k = 0; k < p->nchunks; k++) {
        struct rb_arm_chunk *c = &p->chunks[k];
        if (c->wave != wave)
            continue;
        if (!waited[c->stream]) {
            if (driver_failed(wait_value((CUstream)p->streams[c->stream], flag, generation,
                                         CU_STREAM_WAIT_VALUE_GEQ),
                              "cuStreamWaitValue32", why, len))
                return RB_ARM_CUDA;
            waited[c->stream] = 1;
        }
        if (cuda_failed(post_chunk(p, c), "cudaMemcpyBatchAsync", why, len) ||
            cuda_failed(cudaEventRecord(c->landed[generation & 1], p->streams[c->stream]), "cudaEventRecord", why, len))
            return RB_ARM_CUDA;
    }
    return RB_ARM_OK;
}

/* Each copy's ends must be device memory (not managed): this GPU's at its own end, and one GPU's or
 * pinned host memory (peer -1: an offload's pool) at the other. Sets the plan's two GPUs. */
static int check_pointers(struct rb_arm_plan *p, char *why, size_t len)
{
    void **mine = p->direction == RB_ARM_PUT ? p->src : p->dst, **theirs = p->direction == RB_ARM_PUT ? p->dst : p->src;
    for (size_t i = 0; i < p->total; i++)
        for (int end = 0; end < 2; end++) {
            void *at = end == 0 ? mine[i] : theirs[i];
            const char *name = (end == 0) == (p->direction == RB_ARM_PUT) ? "source" : "target";
            cudaPointerAttributes found;
            int ok = cudaPointerGetAttributes(&found, at) == cudaSuccess;
            if (ok && end == 1 && found.type == cudaMemoryTypeHost)
                found.device = -1; /* the far end in pinned host memory: an offload's pool */
            else if (!ok || found.type != cudaMemoryTypeDevice) {
                cudaGetLastError();
                snprintf(why, len, "copy %zu's %s (%p) is not %s", i, name, at,
                         end == 0 ? "device memory" : "device memory or pinned host memory");
                return RB_ARM_ARGUMENT;
            }
            int *device = end == 0 ? &p->device : &p->peer;
            if (i == 0)
                *device = found.device;
            if (found.device != *device) {
                snprintf(why, len, "copy %zu's %s is on GPU %d, copy 0's on GPU %d: one GPU at each end", i, name,
                         found.device, *device);
                return RB_ARM_ARGUMENT;
            }
        }
    return RB_ARM_OK;
}

/* The release stream first, then the list streams, one after the other (see the top), the flag (0)
 * and the events; the stream-memory probe on the release stream. */
static int make_streams(struct rb_arm_plan *p, char *why, size_t len)
{
    if (cuda_failed(cudaStreamCreateWithFlags(&p->release, cudaStreamNonBlocking), "cudaStreamCreate", why, len))
        return RB_ARM_CUDA;
    p->nstreams = p->lists < RB_ARM_STREAMS ? p->lists : RB_ARM_STREAMS;
    for (int s = 0; s < p->nstreams; s++)
        if (cuda_failed(cudaStreamCreateWithFlags(&p->streams[s], cudaStreamNonBlocking), "cudaStreamCreate", why,
                        len))
            return RB_ARM_CUDA;
    if (cuda_failed(cudaMalloc((void **)&p->flag, 256), "cudaMalloc of the release flag", why, len) ||
        cuda_failed(cudaMemsetAsync(p->flag, 0, 256, p->release), "cudaMemset of the release flag", why, len) ||
        cuda_failed(cudaEventCreate(&p->released[0]), "cudaEventCreate", why, len) ||
        cuda_failed(cudaEventCreate(&p->released[1]), "cudaEventCreate", why, len))
        return RB_ARM_CUDA;
    for (size_t k = 0; k < 2 * p->nchunks; k++)
        if (cuda_failed(cudaEventCreate(&p->chunks[k / 2].landed[k % 2]), "cudaEventCreate", why, len))
            return RB_ARM_CUDA;
    return probe_memops(p->release, p->flag, why, len);
}

/* The release's event, then every chunk's (of parity `at`), polled until `until`; one that never
 * comes marks the plan stuck. */
static int wait_landed(struct rb_arm_plan *p, int at, double until, double timeout, char *why, size_t len)
{
    for (size_t k = 0; k <= p->nchunks; k++) {
        cudaEvent_t event = k == 0 ? p->released[at] : p->chunks[k - 1].landed[at];
        cudaError_t err;
        while ((err = cudaEventQuery(event)) == cudaErrorNotReady)
            if (now() > until) {
                p->stuck = 1;
                if (k == 0)
                    snprintf(why, len, "the release of an armed list had not run %.0f s after it was written", timeout);
                else
                    snprintf(why, len, "an armed list had not landed %.0f s after its release (chunk %zu of list %d)",
                             timeout, k - 1, p->chunks[k - 1].list);
                return RB_ARM_TIMEOUT;
            }
        if (cuda_failed(err, k == 0 ? "the release of an armed list" : "an armed list's copies", why, len))
            return RB_ARM_CUDA;
    }
    return RB_ARM_OK;
}

/* Each list's seconds from the release to its last chunk's event (CUDA events of parity `at`, the
 * GPU's clock). */
static int list_times(struct rb_arm_plan *p, int at, double *seconds, char *why, size_t len)
{
    for (int t = 0; t < p->lists; t++)
        seconds[t] = 0.0;
    for (size_t k = 0; k < p->nchunks; k++) {
        float ms = 0;
        if (cuda_failed(cudaEventElapsedTime(&ms, p->released[at], p->chunks[k].landed[at]), "cudaEventElapsedTime",
                        why, len))
            return RB_ARM_CUDA;
        double s = 1e-3 * (double)ms;
        if (s > seconds[p->chunks[k].list])
            seconds[p->chunks[k].list] = s;
    }
    return RB_ARM_OK;
}

/* The caller's current GPU, set back when an entry point returns: a rank's GPU is its own, and a probe
 * of GPU 0 or a plan's GPU must not move the rank's later allocations (a rank on GPU 1 that probed GPU
 * 0 allocated its next pools there, and UCX then found no device lane to its peer). */
struct device_kept {
    int before;
    device_kept()
    {
        if (cudaGetDevice(&before) != cudaSuccess) {
            before = -1;
            cudaGetLastError();
        }
    }
    ~device_kept()
    {
        if (before >= 0)
            cudaSetDevice(before);
    }
};

extern "C" {

/* "name=value;" items: the codes and bounds as compiled (armed.py checks them against its mirror). */
const char *rb_arm_abi(void)
{
    return "RB_ARM_OK=0;RB_ARM_TIMEOUT=1;RB_ARM_CUDA=2;RB_ARM_NO_MEMORY=3;RB_ARM_UNSUPPORTED=4;RB_ARM_ARGUMENT=5;"
           "RB_ARM_PUT=0;RB_ARM_GET=1;RB_ARM_BOUND=8192;RB_ARM_STREAMS=7;";
}

/* How a step of `total` copies in `lists` lists arms under `bound`: its waves, its chunks, and the
 * lists armed whole ahead of the release (every copy in the first wave). No GPU needed. */
void rb_arm_layout(size_t total, int lists, size_t bound, size_t *waves, size_t *chunks, size_t *armed_lists)
{
    *waves = *chunks = *armed_lists = 0;
    if (lists < 1)
        return;
    bound = bound == 0 || bound > RB_ARM_BOUND ? RB_ARM_BOUND : bound;
    size_t per = total / (size_t)lists, n = 0, whole = 0;
    for (int t = 0; t < lists; t++) {
        n += cut_list((size_t)t * per, (size_t)(t + 1) * per, t, bound, NULL);
        whole += (size_t)(t + 1) * per <= bound;
    }
    *waves = (total + bound - 1) / bound;
    *chunks = n;
    *armed_lists = whole;
}

/* Why an armed list cannot run on GPU `device`, or 0: the batch API, the driver's stream-memory
 * calls, and a probe of them on that GPU (a flag written, then waited for). */
int rb_arm_unsupported(int device, char *why, size_t len)
{
    device_kept kept;
    const char *found = missing();
    if (found != NULL) {
        snprintf(why, len, "%s", found);
        return RB_ARM_UNSUPPORTED;
    }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || device < 0 || device >= count) {
        cudaGetLastError();
        snprintf(why, len, "no GPU %d here (%d visible)", device, count);
        return RB_ARM_UNSUPPORTED;
    }
    cudaStream_t stream = NULL;
    uint32_t *flag = NULL;
    int rc = RB_ARM_CUDA;
    if (!cuda_failed(cudaSetDevice(device), "cudaSetDevice", why, len) &&
        !cuda_failed(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate", why, len) &&
        !cuda_failed(cudaMalloc((void **)&flag, 256), "cudaMalloc of a flag", why, len))
        rc = probe_memops(stream, flag, why, len);
    if (stream != NULL)
        cudaStreamDestroy(stream);
    cudaFree(flag);
    return rc;
}

void rb_arm_destroy(rb_arm_plan *p)
{
    device_kept kept;
    if (p == NULL)
        return;
    cudaSetDevice(p->device);
    /* Armed, never released: let the lists go, stuck or not (the write is queued on the release stream and
     * never blocks the host), else their waits would hold their hardware queues, and any stream sharing
     * one, for ever. */
    if (p->armed && write_value((CUstream)p->release, (CUdeviceptr)(uintptr_t)p->flag, p->generation, 0) != CUDA_SUCCESS)
        p->stuck = 1;
    if (!p->stuck) { /* a stuck stream would hold these calls for ever: leaked instead */
        for (int s = 0; s < p->nstreams; s++)
            if (p->streams[s] != NULL)
                cudaStreamSynchronize(p->streams[s]);
        for (size_t k = 0; p->chunks != NULL && k < 2 * p->nchunks; k++)
            if (p->chunks[k / 2].landed[k % 2] != NULL)
                cudaEventDestroy(p->chunks[k / 2].landed[k % 2]);
        for (int at = 0; at < 2; at++)
            if (p->released[at] != NULL)
                cudaEventDestroy(p->released[at]);
        for (int s = 0; s < p->nstreams; s++)
            if (p->streams[s] != NULL)
                cudaStreamDestroy(p->streams[s]);
        if (p->release != NULL)
            cudaStreamDestroy(p->release);
        cudaFree(p->flag);
    }
    free(p->chunks);
    free(p->dst);
    free(p->src);
    free(p->sizes);
    free(p);
}

/* The plan's host copies of every copy's ends and size, and its chunks. */
static int hold_list(rb_arm_plan *p, const uint64_t *src, const uint64_t *dst, const uint64_t *sizes, char *why,
                     size_t len)
{
    size_t waves = 0, armed = 0, per = p->total / (size_t)p->lists, n = 0;
    rb_arm_layout(p->total, p->lists, p->bound, &waves, &p->nchunks, &armed);
    p->waves = (int)waves;
    p->src = (void **)malloc(p->total * sizeof(void *));
    p->dst = (void **)malloc(p->total * sizeof(void *));
    p->sizes = (size_t *)malloc(p->total * sizeof(size_t));
    p->chunks = (struct rb_arm_chunk *)calloc(p->nchunks, sizeof(struct rb_arm_chunk));
    if (p->src == NULL || p->dst == NULL || p->sizes == NULL || p->chunks == NULL)
        return arm_no_memory(why, len);
    for (size_t i = 0; i < p->total; i++) {
        p->src[i] = (void *)(uintptr_t)src[i];
        p->dst[i] = (void *)(uintptr_t)dst[i];
        p->sizes[i] = (size_t)sizes[i];
    }
    for (int t = 0; t < p->lists; t++)
        n += cut_list((size_t)t * per, (size_t)(t + 1) * per, t, p->bound, p->chunks + n);
    return RB_ARM_OK;
}

/* A step of `total` copies (src[i] -> dst[i], sizes[i] bytes), `lists` lists of total / lists each,
 * armed `bound` copies at a time (0: RB_ARM_BOUND). `direction`: RB_ARM_PUT (the sources are this
 * GPU's) or RB_ARM_GET (the targets are). The plan is made even when it fails (*out: release it). */
int rb_arm_create(int direction, const uint64_t *src, const uint64_t *dst, const uint64_t *sizes, size_t total,
                  int lists, size_t bound, rb_arm_plan **out, char *why, size_t len)
{
    device_kept kept;
    *out = NULL;
    if (direction != RB_ARM_PUT && direction != RB_ARM_GET) {
        snprintf(why, len, "direction %d is neither a put (%d) nor a get (%d)", direction, RB_ARM_PUT, RB_ARM_GET);
        return RB_ARM_ARGUMENT;
    }
    if (total == 0 || lists < 1 || total % (size_t)lists != 0 || bound > RB_ARM_BOUND) {
        snprintf(why, len, "%zu copies in %d lists of equal count, armed %zu at a time (at most %d): no such plan",
                 total, lists, bound, RB_ARM_BOUND);
        return RB_ARM_ARGUMENT;
    }
    const char *found = missing();
    if (found != NULL) {
        snprintf(why, len, "%s", found);
        return RB_ARM_UNSUPPORTED;
    }
    rb_arm_plan *p = (rb_arm_plan *)calloc(1, sizeof(rb_arm_plan));
    if (p == NULL)
        return arm_no_memory(why, len);
    *out = p;
    p->direction = direction;
    p->total = total;
    p->lists = lists;
    p->bound = bound == 0 ? RB_ARM_BOUND : bound;
    int rc = hold_list(p, src, dst, sizes, why, len);
    if (rc != RB_ARM_OK || (rc = check_pointers(p, why, len)) != RB_ARM_OK)
        return rc;
    if (cuda_failed(cudaSetDevice(p->device), "cudaSetDevice", why, len))
        return RB_ARM_CUDA;
    return make_streams(p, why, len);
}

/* Arm the step's first wave behind the next generation of the flag: every list of it waits on the
 * GPU, nothing moves. `cpu_seconds`: the host's time in the arming calls. A step of one wave may be
 * armed while the last one flies (released, not yet landed): it queues behind that one's copies on
 * the same streams, so the GPU holds at most one wave armed, and the copies never wait for the arming. */
int rb_arm_arm(rb_arm_plan *p, double *cpu_seconds, char *why, size_t len)
{
    device_kept kept;
    *cpu_seconds = 0.0;
    if (p->stuck || p->armed || (p->flying && p->waves > 1)) {
        snprintf(why, len, p->stuck   ? "this armed plan timed out before: make another"
                           : p->armed ? "the list is armed already: release it first"
                                      : "a step of more than one wave is armed once the last has landed");
        return RB_ARM_ARGUMENT;
    }
    if (cuda_failed(cudaSetDevice(p->device), "cudaSetDevice", why, len))
        return RB_ARM_CUDA;
    double began = now();
    p->generation++;
    int rc = arm_wave(p, 0, p->generation, why, len);
    *cpu_seconds = now() - began;
    if (rc != RB_ARM_OK) {
        /* Part of the wave may wait on the GPU: let it go (the flag written) so nothing hangs. */
        write_value((CUstream)p->release, (CUdeviceptr)(uintptr_t)p->flag, p->generation, 0);
        return rc;
    }
    p->armed = 1;
    return RB_ARM_OK;
}

/* Release the armed wave (the flag written from the release stream, an event just before it) and
 * submit the later waves behind it; returns without waiting. `late_seconds`: the host's time
 * submitting the later waves (0 for a step of one wave). */
int rb_arm_launch(rb_arm_plan *p, double *late_seconds, char *why, size_t len)
{
    device_kept kept;
    *late_seconds = 0.0;
    if (!p->armed || p->flying) {
        snprintf(why, len, p->flying ? "the last release has not landed: land it first"
                                     : "the list is not armed: arm it before each release");
        return RB_ARM_ARGUMENT;
    }
    if (cuda_failed(cudaSetDevice(p->device), "cudaSetDevice", why, len))
        return RB_ARM_CUDA;
    uint32_t generation = p->generation;
    p->launched_at = now();
    p->armed = 0;
    if (cuda_failed(cudaEventRecord(p->released[generation & 1], p->release), "cudaEventRecord", why, len) ||
        driver_failed(write_value((CUstream)p->release, (CUdeviceptr)(uintptr_t)p->flag, generation, 0),
                      "cuStreamWriteValue32", why, len)) {
        p->stuck = 1; /* the armed wave may never be released */
        return RB_ARM_CUDA;
    }
    p->flying = 1;
    p->flown = generation;
    int rc = RB_ARM_OK;
    double late = now();
    for (int wave = 1; wave < p->waves && rc == RB_ARM_OK; wave++)
        rc = arm_wave(p, wave, generation, why, len);
    *late_seconds = now() - late;
    return rc;
}

/* Wait until every copy of the last release has landed (at most `timeout` s from the release).
 * `wall`: the host's seconds from the release to the last landing seen; `seconds`: each list's, by
 * the GPU's events. */
int rb_arm_land(rb_arm_plan *p, double timeout, double *wall, double *seconds, char *why, size_t len)
{
    device_kept kept;
    *wall = 0.0;
    if (!p->flying) {
        snprintf(why, len, "no release is in flight: release the list before landing it");
        return RB_ARM_ARGUMENT;
    }
    if (cuda_failed(cudaSetDevice(p->device), "cudaSetDevice", why, len))
        return RB_ARM_CUDA;
    int at = (int)(p->flown & 1);
    int rc = wait_landed(p, at, p->launched_at + timeout, timeout, why, len);
    *wall = now() - p->launched_at;
    if (rc != RB_ARM_OK) {
        if (p->armed && write_value((CUstream)p->release, (CUdeviceptr)(uintptr_t)p->flag, p->generation, 0) ==
                            CUDA_SUCCESS) /* the step armed ahead goes too: nothing is left waiting on the flag */
            p->armed = 0;
        return rc;
    }
    p->flying = 0;
    return list_times(p, at, seconds, why, len);
}

/* rb_arm_launch, then rb_arm_land: the armed step released and waited for. */
int rb_arm_release(rb_arm_plan *p, double timeout, double *wall, double *seconds, double *late_seconds, char *why,
                   size_t len)
{
    *wall = 0.0;
    int rc = rb_arm_launch(p, late_seconds, why, len);
    if (rc == RB_ARM_OK)
        return rb_arm_land(p, timeout, wall, seconds, why, len);
    if (p->flying) { /* released, then a later wave failed: land what went, so the plan can be armed again */
        char ignored[64];
        rb_arm_land(p, timeout, wall, seconds, ignored, sizeof(ignored));
    }
    return rc;
}

/* Whether a step is armed (not yet released) and whether one flies (released, not yet landed): what
 * armed.py mirrors after each call, failed ones included. */
void rb_arm_state(rb_arm_plan *p, int *armed, int *flying)
{
    *armed = p->armed;
    *flying = p->flying;
}

/* The plan's shape as made: its GPUs, waves, chunks and streams, and its bound. */
void rb_arm_describe(rb_arm_plan *p, int *device, int *peer, int *waves, size_t *chunks, int *streams, size_t *bound)
{
    *device = p->device;
    *peer = p->peer;
    *waves = p->waves;
    *chunks = p->nchunks;
    *streams = p->nstreams;
    *bound = p->bound;
}

} /* extern "C" */
