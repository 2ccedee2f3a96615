/* rdmabench's native hot loop: one timed step of a round (every window-protocol test: bw, bibw,
 * every concurrent pattern), of a ping-pong (lat), of a one-sided round or of a block list, on the
 * UCP worker and endpoints that UCXX created. Python keeps everything else (patterns, checks, calibration, statistics); only the part
 * between the start and the stop of the clock runs here, so the figure is the link's and not the
 * interpreter's.
 *
 * The round protocol is the one measure/window.py speaks. A rank has targets (links it sends on)
 * and sources (links it receives on): it pre-posts a window of receives for every source and sends
 * each source READY; each target's clock starts when that target's READY arrives and stops when
 * that target's ACK arrives; each source is acknowledged once the step's last message has landed.
 * In between, each link streams `count` messages through its `slots` buffers (the window), each
 * posted as soon as the one before it in its buffer has completed. A pair is a round of one link;
 * bibw is a round of two links, one each way.
 *
 * Every wait gives up after `timeout` seconds, or as soon as `peer_pid` (a peer on this host; 0 if
 * none) no longer exists. Each function returns a status: RB_OK, RB_TIMEOUT, RB_PEER_GONE,
 * RB_UCX_ERROR with the UCX status in *ucx_status, or RB_INTERRUPTED when a signal handler raised.
 *
 * The data buffers' memory type is declared to UCX (`memory_type`, a ucs_memory_type_t; -1 leaves it
 * to UCX), as ucx_perftest does: UCX otherwise looks it up on every message, which costs about a
 * microsecond for CUDA and CUDA-pinned memory.
 *
 * The library is loaded with the GIL held (ctypes.PyDLL), so that a long wait can run Python's
 * signal handlers (rb_init hands over PyErr_CheckSignals): Ctrl-C and the launcher's SIGTERM stop a
 * stuck step at once, as they do in the Python loop.
 *
 * The loop is one library built from its parts, each a translation unit: this file (the waits and
 * posts every step shares, declared in hotloop_parts.h, and the interface's description, rb_abi),
 * hotloop_tagged.c (window rounds and lat), hotloop_rma.c (one-sided rounds and put latency) and
 * hotloop_blocks.c (block lists). Every build compiles them all; the digest covers them all.
 */

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <stddef.h>
#include <stdio.h>
#include <ucp/api/ucp.h>

#include "hotloop.h"
#include "hotloop_parts.h"

typedef int (*rb_check_signals_fn)(void);
static rb_check_signals_fn check_signals;

void rb_init(rb_check_signals_fn check) { check_signals = check; }

#define POLLS_PER_CLOCK_READ 64
/* Busy-polling ranks may outnumber the cores (a laptop, a CI runner, a node shared with other
 * jobs). A rank that spins through its whole time slice while the peer it waits for waits for the
 * core makes every wait last a slice: 8 B lat measured 153 us natively against 10.7 us in Python
 * on a loaded 2-core machine. So once a wait has polled for YIELD_AFTER seconds without progress,
 * every clock read of it gives the core away (sched_yield); on an idle core that returns at once,
 * and a wait that ends sooner never yields, so an unloaded run times what it timed before. */
#define YIELD_AFTER 50e-6

double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void describe(ucp_request_param_t *param, int memory_type)
{
    param->op_attr_mask = 0;
    if (memory_type >= 0) {
        param->op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE;
        param->memory_type = (ucs_memory_type_t)memory_type;
    }
}

void *post_send(ucp_ep_h ep, void *buffer, size_t size, ucp_tag_t tag, int memory_type)
{
    ucp_request_param_t param;
    describe(&param, memory_type);
    return ucp_tag_send_nbx(ep, buffer, size, tag, &param);
}

void *post_recv(ucp_worker_h worker, void *buffer, size_t size, ucp_tag_t tag, int memory_type)
{
    ucp_request_param_t param;
    describe(&param, memory_type);
    return ucp_tag_recv_nbx(worker, buffer, size, tag, FULL_MASK, &param);
}

void *post_flush(ucp_ep_h ep)
{
    ucp_request_param_t param;
    param.op_attr_mask = 0;
    return ucp_ep_flush_nbx(ep, &param);
}

static int peers_alive(const int *pids, int count, int *dead_pid)
{
    for (int i = 0; i < count; i++) {
        if (pids[i] > 0 && kill(pids[i], 0) != 0 && errno == ESRCH) {
            *dead_pid = pids[i];
            return 0;
        }
    }
    return 1;
}

/* One poll of a wait: progress the worker and, every LIVENESS_PERIOD, run Python's signal handlers,
 * check the deadline and whether a peer on this host is gone. `*began` 0 starts the clock at the
 * first clock read (a wait that ends within POLLS_PER_CLOCK_READ polls never reads it). */
int poll_step(ucp_worker_h worker, unsigned *polls, double *began, double *next_check, double timeout,
              const int *pids, int npids, int *dead_pid)
{
    /* Polls in a row that progressed nothing, and when this wait last saw progress (at a clock
     * read; every wait starts its `polls` at 0). One thread progresses a worker (post_into_slot). */
    static _Thread_local unsigned idle_polls;
    static _Thread_local double progressed_at;
    idle_polls = ucp_worker_progress(worker) != 0 ? 0 : idle_polls + 1;
    if (++*polls % POLLS_PER_CLOCK_READ == 0) {
        double t = now();
        if (*polls == POLLS_PER_CLOCK_READ || idle_polls < POLLS_PER_CLOCK_READ)
            progressed_at = t; /* a new wait, or progress since the last clock read */
        else if (t - progressed_at > YIELD_AFTER)
            sched_yield();
        if (*began == 0) {
            *began = t;
            *next_check = t + LIVENESS_PERIOD;
        } else if (t >= *next_check) {
            *next_check = t + LIVENESS_PERIOD;
            if (check_signals != NULL && check_signals() != 0)
                return RB_INTERRUPTED; /* the handler's exception is set: ctypes raises it */
            /* Leave the rest in flight: the job is about to end. */
            if (t - *began > timeout)
                return RB_TIMEOUT;
            if (!peers_alive(pids, npids, dead_pid))
                return RB_PEER_GONE;
        }
    }
    return RB_OK;
}

/* Poll until every request in `requests` has completed; each is freed and set to NULL. */
int wait_all(ucp_worker_h worker, void **requests, int count, double timeout, const int *pids, int npids,
             int *dead_pid, int *ucx_status)
{
    int index = 0, rc;
    unsigned polls = 0;
    double began = 0, next_check = 0;
    int failed = RB_OK;
    while (index < count) {
        void *request = requests[index];
        if (request == NULL) {
            index++;
            continue;
        }
        if (UCS_PTR_IS_ERR(request)) {
            *ucx_status = UCS_PTR_STATUS(request);
            requests[index++] = NULL;
            failed = RB_UCX_ERROR;
            continue;
        }
        ucs_status_t status = ucp_request_check_status(request);
        if (status != UCS_INPROGRESS) {
            if (status != UCS_OK) {
                *ucx_status = status;
                failed = RB_UCX_ERROR;
            }
            ucp_request_free(request);
            requests[index++] = NULL;
            continue;
        }
        if ((rc = poll_step(worker, &polls, &began, &next_check, timeout, pids, npids, dead_pid)) != RB_OK)
            return rc;
    }
    return failed;
}

/* Test one request slot: 1 when it has completed (the slot is freed and set to NULL), 0 while in
 * flight, -1 on failure (*ucx_status set). */
int settle(void **slot, int *ucx_status)
{
    void *request = *slot;
    if (request == NULL)
        return 1;
    if (UCS_PTR_IS_ERR(request)) {
        *ucx_status = UCS_PTR_STATUS(request);
        *slot = NULL;
        return -1;
    }
    ucs_status_t status = ucp_request_check_status(request);
    if (status == UCS_INPROGRESS)
        return 0;
    ucp_request_free(request);
    *slot = NULL;
    if (status != UCS_OK) {
        *ucx_status = status;
        return -1;
    }
    return 1;
}

/* "UCX version|source digest" when built at install time (setup.py), else empty. */
#ifndef RB_BUILT_AGAINST
#define RB_BUILT_AGAINST ""
#endif
const char *rb_built_against(void) { return RB_BUILT_AGAINST; }

const char *rb_status_string(int ucx_status)
{
    return ucs_status_string((ucs_status_t)ucx_status);
}

/* rb_abi(): see hotloop.h. Built once, on the first call. */
#define RB_FIELD(s, f) n += snprintf(abi + n, sizeof abi - n, #s "." #f "=%zu;", offsetof(s, f))
#define RB_SIZE(s) n += snprintf(abi + n, sizeof abi - n, #s "=%zu;", sizeof(s))
#define RB_CONST(c) n += snprintf(abi + n, sizeof abi - n, #c "=%d;", (int)(c))

const char *rb_abi(void)
{
    static char abi[2048];
    if (abi[0])
        return abi;
    size_t n = 0;
    RB_CONST(RB_OK); RB_CONST(RB_TIMEOUT); RB_CONST(RB_PEER_GONE); RB_CONST(RB_UCX_ERROR);
    RB_CONST(RB_NO_MEMORY); RB_CONST(RB_INTERRUPTED); RB_CONST(RB_PUT); RB_CONST(RB_GET); RB_CONST(RB_TAG);
    RB_SIZE(rb_link);
    RB_FIELD(rb_link, ep); RB_FIELD(rb_link, peer_pid); RB_FIELD(rb_link, count); RB_FIELD(rb_link, slots);
    RB_FIELD(rb_link, memory_type); RB_FIELD(rb_link, size); RB_FIELD(rb_link, buffers);
    RB_FIELD(rb_link, data_tag); RB_FIELD(rb_link, ready_tag); RB_FIELD(rb_link, ack_tag);
    RB_SIZE(rb_rma_link);
    RB_FIELD(rb_rma_link, ep); RB_FIELD(rb_rma_link, peer_pid); RB_FIELD(rb_rma_link, count);
    RB_FIELD(rb_rma_link, memory_type); RB_FIELD(rb_rma_link, size); RB_FIELD(rb_rma_link, buffers);
    RB_FIELD(rb_rma_link, remote); RB_FIELD(rb_rma_link, rkeys); RB_FIELD(rb_rma_link, ready_tag);
    RB_FIELD(rb_rma_link, done_tag);
    RB_SIZE(rb_blocks_link);
    RB_FIELD(rb_blocks_link, ep); RB_FIELD(rb_blocks_link, peer_pid); RB_FIELD(rb_blocks_link, memory_type);
    RB_FIELD(rb_blocks_link, batch); RB_FIELD(rb_blocks_link, first); RB_FIELD(rb_blocks_link, pool);
    RB_FIELD(rb_blocks_link, offsets); RB_FIELD(rb_blocks_link, lengths); RB_FIELD(rb_blocks_link, remote_pool);
    RB_FIELD(rb_blocks_link, remote_offsets); RB_FIELD(rb_blocks_link, rkey); RB_FIELD(rb_blocks_link, ready_tag);
    RB_FIELD(rb_blocks_link, done_tag); RB_FIELD(rb_blocks_link, data_tag);
    if (n >= sizeof abi)
        abi[0] = 0; /* truncated: an empty description, which the loader refuses */
    return abi;
}
