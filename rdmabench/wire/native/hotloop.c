/* rdmabench's native hot loop: one timed step of a round (every window-protocol test: bw, bibw,
 * every concurrent pattern) or of a ping-pong (lat), on the UCP worker and endpoints that UCXX
 * created. Python keeps everything else (patterns, checks, calibration, statistics); only the part
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


typedef int (*rb_check_signals_fn)(void);
static rb_check_signals_fn check_signals;

void rb_init(rb_check_signals_fn check) { check_signals = check; }

#define POLLS_PER_CLOCK_READ 64
#define LIVENESS_PERIOD 0.25
/* Busy-polling ranks may outnumber the cores (a laptop, a CI runner, a node shared with other
 * jobs). A rank that spins through its whole time slice while the peer it waits for waits for the
 * core makes every wait last a slice: 8 B lat measured 153 us natively against 10.7 us in Python
 * on a loaded 2-core machine. So once a wait has polled for YIELD_AFTER seconds without progress,
 * every clock read of it gives the core away (sched_yield); on an idle core that returns at once,
 * and a wait that ends sooner never yields, so an unloaded run times what it timed before. */
#define YIELD_AFTER 50e-6
#define FULL_MASK ((ucp_tag_t)-1)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define SIGNAL_MEMORY UCS_MEMORY_TYPE_HOST

static void describe(ucp_request_param_t *param, int memory_type)
{
    param->op_attr_mask = 0;
    if (memory_type >= 0) {
        param->op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE;
        param->memory_type = (ucs_memory_type_t)memory_type;
    }
}

static void *post_send(ucp_ep_h ep, void *buffer, size_t size, ucp_tag_t tag, int memory_type)
{
    ucp_request_param_t param;
    describe(&param, memory_type);
    return ucp_tag_send_nbx(ep, buffer, size, tag, &param);
}

static void *post_recv(ucp_worker_h worker, void *buffer, size_t size, ucp_tag_t tag, int memory_type)
{
    ucp_request_param_t param;
    describe(&param, memory_type);
    return ucp_tag_recv_nbx(worker, buffer, size, tag, FULL_MASK, &param);
}

/* A streamed message's completion, run by UCX inside ucp_worker_progress: the request is freed
 * here and its slot cleared (NULL: landed) or, on failure, set to the status as an error pointer,
 * which settle_slot() reports. The loop then tests a message by reading its slot, where it would
 * otherwise call into UCP twice per message (test, then free; each through the worker's lock, which
 * UCXX's thread-safe worker takes on every call): ucx_perftest, too, completes by callback. */
static void slot_done(void *request, ucs_status_t status, void *slot)
{
    ucp_request_free(request);
    __atomic_store_n((void **)slot, status == UCS_OK ? NULL : UCS_STATUS_PTR(status), __ATOMIC_RELEASE);
}

static void sent_into_slot(void *request, ucs_status_t status, void *slot) { slot_done(request, status, slot); }

static void landed_in_slot(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info, void *slot)
{
    (void)info;
    slot_done(request, status, slot);
}

/* Post a streamed message whose completion clears `*slot` (slot_done); a message that completed at
 * once (NULL) or failed at once (an error pointer) is stored as it is. UCX runs the callback only
 * from ucp_worker_progress, never inside the nbx call (UCP_OP_ATTR_FLAG_NO_IMM_CMPL is not set), and
 * this loop is the only thread that progresses the worker: the request is in its slot before its
 * completion can clear it. A progress thread on this worker would break that. */
static void post_into_slot(void **slot, int sending, ucp_worker_h worker, ucp_ep_h ep, void *buffer, size_t size,
                           ucp_tag_t tag, int memory_type)
{
    ucp_request_param_t param;
    ucp_tag_recv_info_t info; /* filled where a receive completes at once; not needed */
    describe(&param, memory_type);
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.user_data = slot;
    void *request;
    if (sending) {
        param.cb.send = sent_into_slot;
        request = ucp_tag_send_nbx(ep, buffer, size, tag, &param);
    } else {
        param.op_attr_mask |= UCP_OP_ATTR_FIELD_RECV_INFO;
        param.recv_info.tag_info = &info;
        param.cb.recv = landed_in_slot;
        request = ucp_tag_recv_nbx(worker, buffer, size, tag, FULL_MASK, &param);
    }
    __atomic_store_n(slot, request, __ATOMIC_RELEASE);
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
static int poll_step(ucp_worker_h worker, unsigned *polls, double *began, double *next_check, double timeout,
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
static int wait_all(ucp_worker_h worker, void **requests, int count, double timeout, const int *pids, int npids,
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
static int settle(void **slot, int *ucx_status)
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

/* One end of a link in a round: the peer's endpoint and process, this end's message buffers and
 * the link's tags. For a target, `ready_tag`/`ack_tag` are received from the peer; for a source,
 * they are sent to it. Data tags carry the message slot in their low bits. */

/* A streamed message's slot (post_into_slot): 1 when it has landed, 0 while in flight, -1 on
 * failure (*ucx_status set; the slot is cleared). */
static int settle_slot(void **slot, int *ucx_status)
{
    void *state = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (state == NULL)
        return 1;
    if (!UCS_PTR_IS_ERR(state))
        return 0; /* its request: in flight until slot_done clears it */
    *ucx_status = UCS_PTR_STATUS(state);
    *slot = NULL;
    return -1;
}

/* Per-link progress of one step. */
typedef struct {
    void **requests; /* the link's data messages in flight: message m in requests[m % slots] */
    int posted;      /* how many of them have been posted */
    int done;        /* how many of them have completed, in order */
    void *ready;     /* target: READY from the peer; source: READY sent to it */
    void *ack;       /* target: ACK from the peer; source: ACK sent to it */
    int state;       /* target: 0 waiting READY, 1 window posted, 2 acknowledged; source: 0 landing, 1 ACK posted, 2 done */
    double start;
} rb_progress;

/* Keep a link streaming: settle its completed messages in order, and post the next ones into the
 * buffers they free, so that up to `slots` messages are always in flight until `count` have been
 * posted. Message m uses buffer m % slots and carries that slot in its tag: UCX matches messages
 * of one tag in order, so message m lands in the receive posted for it. -1 on failure. */
static int stream(ucp_worker_h worker, rb_progress *p, const rb_link *l, int sending, int *ucx_status)
{
    int r;
    while (p->done < p->posted && (r = settle_slot(&p->requests[p->done % l->slots], ucx_status)) != 0) {
        if (r < 0)
            return -1;
        p->done++;
    }
    while (p->posted < l->count && p->posted - p->done < l->slots) {
        int k = p->posted % l->slots;
        post_into_slot(&p->requests[k], sending, worker, l->ep, l->buffers[k], l->size, l->data_tag | (ucp_tag_t)k,
                       l->memory_type);
        p->posted++;
    }
    return 0;
}

/* One step of a round on this rank: `targets` it sends `count` messages to, `sources` it receives
 * `count` from, each link streaming through its `slots` buffers (stream()). Each target's clock
 * starts when its READY arrives (its first messages are posted at once) and stops when its ACK
 * arrives: `seconds[t]`. A source is acknowledged as soon as its last message has landed, whatever
 * this rank's own targets are doing, so no link waits on another. `signals`: 16 bytes per target of
 * scratch for READY and ACK. */
int rb_round(ucp_worker_h worker, const rb_link *targets, int ntargets, const rb_link *sources, int nsources,
             void *signal_out, void *signals, double timeout, double *seconds, int *dead_pid, int *ucx_status)
{
    int total = 0, rc = RB_OK, nlinks = ntargets + nsources;
    for (int s = 0; s < nsources; s++)
        total += sources[s].slots;
    for (int t = 0; t < ntargets; t++)
        total += targets[t].slots;
    void **requests = calloc((size_t)total + 1, sizeof(void *));
    rb_progress *progress = calloc((size_t)nlinks + 1, sizeof(rb_progress));
    int *pids = calloc((size_t)nlinks + 1, sizeof(int));
    if (requests == NULL || progress == NULL || pids == NULL) {
        rc = RB_NO_MEMORY;
        goto done;
    }
    rb_progress *out = progress, *in = progress + ntargets;
    char *scratch = signals;
    void **next = requests;
    for (int t = 0; t < ntargets; t++, next += targets[t - 1].slots) {
        pids[t] = targets[t].peer_pid;
        out[t].requests = next;
        out[t].ack = post_recv(worker, scratch + 16 * t, 8, targets[t].ack_tag, SIGNAL_MEMORY);
        out[t].ready = post_recv(worker, scratch + 16 * t + 8, 8, targets[t].ready_tag, SIGNAL_MEMORY);
    }
    for (int s = 0; s < nsources; s++, next += sources[s - 1].slots) {
        pids[ntargets + s] = sources[s].peer_pid;
        in[s].requests = next;
        stream(worker, &in[s], &sources[s], 0, ucx_status); /* pre-post the first receives */
        in[s].ready = post_send(sources[s].ep, signal_out, 8, sources[s].ready_tag, SIGNAL_MEMORY);
    }
    double began = now(), next_check = began + LIVENESS_PERIOD;
    int finished = 0, r;
    unsigned polls = 0;
    while (finished < nlinks) {
        finished = 0;
        for (int t = 0; t < ntargets; t++) {
            rb_progress *p = &out[t];
            if (p->state == 0) {
                if ((r = settle(&p->ready, ucx_status)) < 0) { rc = RB_UCX_ERROR; goto done; }
                if (r > 0) {
                    p->start = now();
                    p->state = 1;
                }
            }
            if (p->state >= 1 && stream(worker, p, &targets[t], 1, ucx_status) < 0) { rc = RB_UCX_ERROR; goto done; }
            if (p->state == 1) {
                if ((r = settle(&p->ack, ucx_status)) < 0) { rc = RB_UCX_ERROR; goto done; }
                if (r > 0) {
                    seconds[t] = now() - p->start;
                    p->state = 2;
                }
            }
            finished += p->state == 2 && p->done == targets[t].count;
        }
        for (int s = 0; s < nsources; s++) {
            rb_progress *p = &in[s];
            if (stream(worker, p, &sources[s], 0, ucx_status) < 0 || settle(&p->ready, ucx_status) < 0) {
                rc = RB_UCX_ERROR;
                goto done;
            }
            if (p->state == 0 && p->done == sources[s].count) {
                p->ack = post_send(sources[s].ep, signal_out, 8, sources[s].ack_tag, SIGNAL_MEMORY);
                p->state = 1;
            }
            if (p->state == 1) {
                if ((r = settle(&p->ack, ucx_status)) < 0) { rc = RB_UCX_ERROR; goto done; }
                if (r > 0)
                    p->state = 2;
            }
            finished += p->state == 2 && p->ready == NULL;
        }
        if (finished == nlinks)
            break;
        if ((rc = poll_step(worker, &polls, &began, &next_check, timeout, pids, nlinks, dead_pid)) != RB_OK)
            goto done;
    }
done:
    /* On failure the job is about to end: requests still in flight are left to it, and so are their
     * slots, which their completions will still write (a few bytes a link, once). */
    if (rc == RB_OK)
        free(requests);
    free(progress);
    free(pids);
    return rc;
}

/* lat, the side that times: wait for READY, then `count` round trips back to back (each pong's
 * receive posted before its ping is sent); the clock covers all of them. Round trips in a row, in
 * C, keep UCX's and this loop's code and data hot, as ucx_perftest's loop does: one round trip per
 * call from Python measured the caches the interpreter had just evicted. */
int rb_lat_ping(ucp_worker_h worker, ucp_ep_h ep, void *out, void *in, size_t size, int memory_type, ucp_tag_t out_tag,
                ucp_tag_t in_tag, ucp_tag_t ready_tag, void *ready_in, int count, double timeout, int peer_pid,
                double *seconds, int *dead_pid, int *ucx_status)
{
    void *requests[2];
    requests[1] = post_recv(worker, in, size, in_tag, memory_type);
    void *ready = post_recv(worker, ready_in, 8, ready_tag, SIGNAL_MEMORY);
    int rc = wait_all(worker, &ready, 1, timeout, &peer_pid, 1, dead_pid, ucx_status);
    if (rc != RB_OK)
        return rc;
    double start = now();
    for (int i = 0; i < count && rc == RB_OK; i++) {
        if (i > 0)
            requests[1] = post_recv(worker, in, size, in_tag, memory_type);
        requests[0] = post_send(ep, out, size, out_tag, memory_type);
        rc = wait_all(worker, requests, 2, timeout, &peer_pid, 1, dead_pid, ucx_status);
    }
    *seconds = now() - start;
    return rc;
}

/* lat, the echoing side: pre-post the ping's receive, say READY, answer `count` pings. */
int rb_lat_pong(ucp_worker_h worker, ucp_ep_h ep, void *out, void *in, size_t size, int memory_type, ucp_tag_t out_tag,
                ucp_tag_t in_tag, ucp_tag_t ready_tag, void *signal, int count, double timeout, int peer_pid,
                int *dead_pid, int *ucx_status)
{
    void *ping = post_recv(worker, in, size, in_tag, memory_type);
    void *ready = post_send(ep, signal, 8, ready_tag, SIGNAL_MEMORY);
    int rc = wait_all(worker, &ready, 1, timeout, &peer_pid, 1, dead_pid, ucx_status);
    for (int i = 0; i < count && rc == RB_OK; i++) {
        rc = wait_all(worker, &ping, 1, timeout, &peer_pid, 1, dead_pid, ucx_status);
        if (rc != RB_OK)
            break;
        if (i + 1 < count)
            ping = post_recv(worker, in, size, in_tag, memory_type); /* before the pong: the next ping may follow it at once */
        void *pong = post_send(ep, out, size, out_tag, memory_type);
        rc = wait_all(worker, &pong, 1, timeout, &peer_pid, 1, dead_pid, ucx_status);
    }
    return rc;
}

/* --- One-sided (RMA): put and get -------------------------------------------------------------
 *
 * A link's passive end (the owner of the remote memory: dst for put, src for get) maps its buffers
 * with ucp_mem_map and packs a remote key per buffer; the active end unpacks them against its
 * endpoint and moves the bytes with ucp_put_nbx or ucp_get_nbx. A step: the passive end sends READY
 * (its memory holds what the step needs), the active end starts its clock, posts the window and, for
 * put, an endpoint flush (UCX's remote completion: the bytes are in the target's memory); its clock
 * stops when the flush completes (put) or the last get has landed (get). It then tells the passive
 * end (DONE), which may check or refill its memory. */


/* Map memory for remote access and pack its remote key. `*address` is the program's memory; NULL
 * asks UCX for host memory of its own (UCP_MEM_MAP_ALLOCATE, as ucx_perftest allocates its buffers):
 * UCX takes it from a shared-memory segment (sysv, posix) where it can, so a peer on the node
 * attaches the segment and puts become CPU stores, where the program's own memory is reachable only
 * by cma. The address UCX chose is written back to `*address`. */
int rb_mem_map(ucp_context_h context, void **address, size_t length, int memory_type, ucp_mem_h *memh,
               void **rkey_buffer, size_t *rkey_size, int *ucx_status)
{
    ucp_mem_map_params_t params;
    params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    params.address = *address;
    params.length = length;
    if (*address == NULL) {
        params.field_mask |= UCP_MEM_MAP_PARAM_FIELD_FLAGS;
        params.flags = UCP_MEM_MAP_ALLOCATE;
    } else if (memory_type >= 0) {
        params.field_mask |= UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
        params.memory_type = (ucs_memory_type_t)memory_type;
    }
    ucs_status_t status = ucp_mem_map(context, &params, memh);
    if (status == UCS_OK) {
        if (*address == NULL) {
            ucp_mem_attr_t attr;
            attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
            status = ucp_mem_query(*memh, &attr);
            *address = attr.address;
        }
        if (status == UCS_OK)
            status = ucp_rkey_pack(context, *memh, rkey_buffer, rkey_size);
        if (status != UCS_OK)
            ucp_mem_unmap(context, *memh);
    }
    *ucx_status = status;
    return status == UCS_OK ? RB_OK : RB_UCX_ERROR;
}

void rb_rkey_buffer_release(void *rkey_buffer) { ucp_rkey_buffer_release(rkey_buffer); }

void rb_mem_unmap(ucp_context_h context, ucp_mem_h memh) { ucp_mem_unmap(context, memh); }

int rb_rkey_unpack(ucp_ep_h ep, const void *rkey_buffer, ucp_rkey_h *rkey, int *ucx_status)
{
    ucs_status_t status = ucp_ep_rkey_unpack(ep, rkey_buffer, rkey);
    *ucx_status = status;
    return status == UCS_OK ? RB_OK : RB_UCX_ERROR;
}

void rb_rkey_destroy(ucp_rkey_h rkey) { ucp_rkey_destroy(rkey); }


static void *post_rma(int op, const rb_rma_link *link, int k)
{
    ucp_request_param_t param;
    describe(&param, link->memory_type);
    if (op == RB_PUT)
        return ucp_put_nbx(link->ep, link->buffers[k], link->size, link->remote[k], link->rkeys[k], &param);
    return ucp_get_nbx(link->ep, link->buffers[k], link->size, link->remote[k], link->rkeys[k], &param);
}

static void *post_flush(ucp_ep_h ep)
{
    ucp_request_param_t param;
    param.op_attr_mask = 0;
    return ucp_ep_flush_nbx(ep, &param);
}

/* Per-link progress of a one-sided step. Active: 0 waiting READY, 1 window (and flush) posted,
 * 2 DONE posted, 3 finished. Passive: 0 READY posted, waiting DONE; 1 finished. */
typedef struct {
    void **requests;
    int done;
    void *ready;
    void *flush;
    void *done_msg;
    int state;
    double start;
} rb_rma_progress;

static int rma_active(ucp_worker_h worker, int op, const rb_rma_link *link, rb_rma_progress *p, void *signal_out,
                      double *seconds, int *ucx_status)
{
    int r;
    (void)worker;
    if (p->state == 0) {
        if ((r = settle(&p->ready, ucx_status)) < 0)
            return -1;
        if (r == 0)
            return 0;
        p->start = now();
        for (int k = 0; k < link->count; k++)
            p->requests[k] = post_rma(op, link, k);
        if (op == RB_PUT)
            p->flush = post_flush(link->ep);
        p->state = 1;
    }
    if (p->state == 1) {
        while (p->done < link->count && (r = settle(&p->requests[p->done], ucx_status)) != 0) {
            if (r < 0)
                return -1;
            p->done++;
        }
        if ((r = settle(&p->flush, ucx_status)) < 0)
            return -1;
        if (p->done < link->count || r == 0)
            return 0;
        *seconds = now() - p->start;
        p->done_msg = post_send(link->ep, signal_out, 8, link->done_tag, SIGNAL_MEMORY);
        p->state = 2;
    }
    if (p->state == 2) {
        if ((r = settle(&p->done_msg, ucx_status)) < 0)
            return -1;
        if (r > 0)
            p->state = 3;
    }
    return p->state == 3;
}

/* One step of a one-sided round on this rank: the links it drives (`active`, each timed into
 * `seconds`) and those whose memory it lends (`passive`). `signals`: 8 bytes per link of scratch. */
int rb_rma_round(ucp_worker_h worker, int op, const rb_rma_link *active, int nactive, const rb_rma_link *passive,
                 int npassive, void *signal_out, void *signals, double timeout, double *seconds, int *dead_pid,
                 int *ucx_status)
{
    int total = 0, rc = RB_OK, nlinks = nactive + npassive;
    for (int a = 0; a < nactive; a++)
        total += active[a].count;
    void **requests = calloc((size_t)total + 1, sizeof(void *));
    rb_rma_progress *progress = calloc((size_t)nlinks + 1, sizeof(rb_rma_progress));
    int *pids = calloc((size_t)nlinks + 1, sizeof(int));
    if (requests == NULL || progress == NULL || pids == NULL) {
        rc = RB_NO_MEMORY;
        goto done;
    }
    char *scratch = signals;
    void **next = requests;
    for (int a = 0; a < nactive; a++) {
        pids[a] = active[a].peer_pid;
        progress[a].requests = next;
        next += active[a].count;
        progress[a].ready = post_recv(worker, scratch + 8 * a, 8, active[a].ready_tag, SIGNAL_MEMORY);
    }
    for (int s = 0; s < npassive; s++) {
        rb_rma_progress *p = &progress[nactive + s];
        pids[nactive + s] = passive[s].peer_pid;
        p->done_msg = post_recv(worker, scratch + 8 * (nactive + s), 8, passive[s].done_tag, SIGNAL_MEMORY);
        p->ready = post_send(passive[s].ep, signal_out, 8, passive[s].ready_tag, SIGNAL_MEMORY);
    }
    double began = now(), next_check = began + LIVENESS_PERIOD;
    unsigned polls = 0;
    for (;;) {
        int finished = 0, r;
        for (int a = 0; a < nactive; a++) {
            if ((r = rma_active(worker, op, &active[a], &progress[a], signal_out, &seconds[a], ucx_status)) < 0) {
                rc = RB_UCX_ERROR;
                goto done;
            }
            finished += r;
        }
        for (int s = 0; s < npassive; s++) {
            rb_rma_progress *p = &progress[nactive + s];
            int sent = settle(&p->ready, ucx_status), told = settle(&p->done_msg, ucx_status);
            if (sent < 0 || told < 0) {
                rc = RB_UCX_ERROR;
                goto done;
            }
            finished += sent > 0 && told > 0;
        }
        if (finished == nlinks)
            break;
        if ((rc = poll_step(worker, &polls, &began, &next_check, timeout, pids, nlinks, dead_pid)) != RB_OK)
            goto done;
    }
done:
    free(requests);
    free(progress);
    free(pids);
    return rc;
}

/* Poll until the byte at `flag` reads `expect` (the peer's put has landed: UCX writes a put's bytes
 * in order on the transports that offer polling, as ucx_perftest's put latency assumes). */
static int wait_flag(ucp_worker_h worker, volatile const uint8_t *flag, uint8_t expect, double timeout, int *pid,
                     int *dead_pid)
{
    unsigned polls = 0;
    double began = 0, next_check = 0;
    int rc = RB_OK;
    while (*flag != expect && rc == RB_OK)
        rc = poll_step(worker, &polls, &began, &next_check, timeout, pid, 1, dead_pid);
    return rc;
}

/* put latency, either side: the pinging side (`ping` = 1) waits for READY, starts the clock, puts
 * its message into the peer's buffer and stops when the peer's put has set the last byte of its own
 * incoming buffer to `expect`; the echoing side sends READY, waits for the ping the same way and puts
 * its answer back. */
int rb_put_pingpong(ucp_worker_h worker, int ping, const rb_rma_link *link, volatile uint8_t *flag, uint8_t expect,
                    void *signal, double timeout, double *seconds, int *dead_pid, int *ucx_status)
{
    int pid = link->peer_pid, rc;
    void *request;
    if (ping) {
        request = post_recv(worker, signal, 8, link->ready_tag, SIGNAL_MEMORY);
        if ((rc = wait_all(worker, &request, 1, timeout, &pid, 1, dead_pid, ucx_status)) != RB_OK)
            return rc;
        double start = now();
        request = post_rma(RB_PUT, link, 0);
        rc = wait_flag(worker, flag, expect, timeout, &pid, dead_pid);
        *seconds = now() - start;
    } else {
        request = post_send(link->ep, signal, 8, link->ready_tag, SIGNAL_MEMORY);
        if ((rc = wait_all(worker, &request, 1, timeout, &pid, 1, dead_pid, ucx_status)) != RB_OK)
            return rc;
        if ((rc = wait_flag(worker, flag, expect, timeout, &pid, dead_pid)) != RB_OK)
            return rc;
        request = post_rma(RB_PUT, link, 0);
    }
    if (rc != RB_OK)
        return rc;
    return wait_all(worker, &request, 1, timeout, &pid, 1, dead_pid, ucx_status);
}

/* --- Block lists (KV-cache shaped transfers) ----------------------------------------------------
 *
 * One transfer moves its descriptors (first[t] .. first[t + 1] - 1: blocks, or runs of blocks adjacent
 * at both ends, of lengths[k] bytes) between slots of two pools, as puts (then an endpoint flush),
 * gets or tagged messages; `batch` transfers are posted back to back per step. The
 * initiator (the sender for tagged messages) times each transfer from the start of its posting to
 * its completion: the flush (put), its last get, or the receiver's ACK of its last block (tagged),
 * and how long the posting itself took. Offsets are byte offsets into each pool, transfer by
 * transfer. `stall` > 0 plants a slow first transfer (RDMABENCH_FAULT=slow:N). */



/* A step's transfers complete by callback, never by scanning them: a poll costs the same with one
 * transfer in flight or a million (scanning every unfinished transfer on every poll made a step
 * quadratic in its transfers: 65,536 one-block transfers took minutes). Each request of a transfer
 * (its blocks; the put's flush; the tagged sender's ACK; the tagged receiver's blocks) counts down
 * the transfer's `remaining` in its completion callback (run inside ucp_worker_progress, on this
 * thread: post_into_slot says why) or at once when it completed or failed at once. */
typedef struct {
    double *seconds;      /* each transfer's seconds, start of posting to its last completion, or NULL */
    int *order;           /* the transfers in the order they completed, or NULL */
    int finished;         /* transfers complete */
    ucs_status_t status;  /* the first request that failed, UCS_OK while none */
} rb_step;

typedef struct {
    rb_step *step;
    int index;
    int remaining; /* its requests still in flight, +1 while it is being posted */
    double start;
} rb_transfer;

static void transfer_part(rb_transfer *x, ucs_status_t status)
{
    if (status != UCS_OK && x->step->status == UCS_OK)
        x->step->status = status;
    if (--x->remaining > 0)
        return;
    if (x->step->seconds != NULL)
        x->step->seconds[x->index] = now() - x->start;
    if (x->step->order != NULL)
        x->step->order[x->step->finished] = x->index;
    x->step->finished++;
}

static void part_sent(void *request, ucs_status_t status, void *transfer)
{
    ucp_request_free(request);
    transfer_part(transfer, status);
}

static void part_landed(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info, void *transfer)
{
    (void)info;
    ucp_request_free(request);
    transfer_part(transfer, status);
}

/* A request of `x` as posted: one done (NULL) or failed (an error pointer) at once counts now; one in
 * flight counts in its callback. */
static void posted_part(rb_transfer *x, void *request)
{
    if (request == NULL)
        transfer_part(x, UCS_OK);
    else if (UCS_PTR_IS_ERR(request))
        transfer_part(x, UCS_PTR_STATUS(request));
}

/* `param` for a request of transfer `x`: its memory type, its callback (a receive's or a send's). */
static void part_param(ucp_request_param_t *param, ucp_tag_recv_info_t *info, int memory_type, rb_transfer *x)
{
    describe(param, memory_type);
    param->op_attr_mask |= UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param->user_data = x;
    if (info != NULL) {
        param->op_attr_mask |= UCP_OP_ATTR_FIELD_RECV_INFO;
        param->recv_info.tag_info = info; /* filled where a receive completes at once; not needed */
        param->cb.recv = part_landed;
    } else {
        param->cb.send = part_sent;
    }
}

static void post_block(int op, const rb_blocks_link *l, int k, rb_transfer *x)
{
    ucp_request_param_t param;
    part_param(&param, NULL, l->memory_type, x);
    void *local = l->pool + l->offsets[k];
    size_t length = l->lengths[k];
    uint64_t remote = l->remote_pool + l->remote_offsets[k];
    void *request;
    if (op == RB_TAG)
        request = ucp_tag_send_nbx(l->ep, local, length, l->data_tag | (ucp_tag_t)k, &param);
    else if (op == RB_PUT)
        request = ucp_put_nbx(l->ep, local, length, remote, l->rkey, &param);
    else
        request = ucp_get_nbx(l->ep, local, length, remote, l->rkey, &param);
    posted_part(x, request);
}

static void post_part_recv(ucp_worker_h worker, void *buffer, size_t size, ucp_tag_t tag, int memory_type,
                           rb_transfer *x)
{
    ucp_request_param_t param;
    ucp_tag_recv_info_t info;
    part_param(&param, &info, memory_type, x);
    posted_part(x, ucp_tag_recv_nbx(worker, buffer, size, tag, FULL_MASK, &param));
}

static void post_part_flush(ucp_ep_h ep, rb_transfer *x)
{
    ucp_request_param_t param;
    part_param(&param, NULL, -1, x);
    posted_part(x, ucp_ep_flush_nbx(ep, &param));
}

/* Poll until every transfer of `step` completed or one failed. */
static int wait_transfers(ucp_worker_h worker, rb_step *step, int batch, double *began, double timeout, int *pid,
                          int *dead_pid, int *ucx_status)
{
    unsigned polls = 0;
    double next_check = *began + LIVENESS_PERIOD;
    int rc = RB_OK;
    while (step->finished < batch && step->status == UCS_OK && rc == RB_OK)
        rc = poll_step(worker, &polls, began, &next_check, timeout, pid, 1, dead_pid);
    if (rc == RB_OK && step->status != UCS_OK) {
        *ucx_status = step->status;
        rc = RB_UCX_ERROR;
    }
    return rc;
}

/* The initiator's handshake around a step, for a step moved elsewhere (the GPU-initiated path):
 * wait for the other end's READY; after the step, send DONE (one-sided) and wait for it to leave. */
int rb_blocks_ready(ucp_worker_h worker, const rb_blocks_link *l, void *scratch, double timeout, int *dead_pid,
                    int *ucx_status)
{
    int pid = l->peer_pid;
    void *ready = post_recv(worker, scratch, 8, l->ready_tag, SIGNAL_MEMORY);
    return wait_all(worker, &ready, 1, timeout, &pid, 1, dead_pid, ucx_status);
}

int rb_blocks_done(ucp_worker_h worker, const rb_blocks_link *l, void *signal, double timeout, int *dead_pid,
                   int *ucx_status)
{
    int pid = l->peer_pid;
    void *told = post_send(l->ep, signal, 8, l->done_tag, SIGNAL_MEMORY);
    return wait_all(worker, &told, 1, timeout, &pid, 1, dead_pid, ucx_status);
}

/* The initiator's step: `post_seconds[t]`, `seconds[t]` per transfer, `step_seconds` for all. A step
 * that ends early (a timeout, a peer gone, a failure) leaves its requests in flight and their
 * transfers' records allocated (the job is about to end): a late callback never writes freed memory. */
int rb_blocks_active(ucp_worker_h worker, int op, const rb_blocks_link *l, void *signal, void *scratch, double timeout,
                     double stall, double *post_seconds, double *seconds, double *step_seconds, int *dead_pid,
                     int *ucx_status)
{
    int pid = l->peer_pid, rc = RB_OK;
    rb_step *step = calloc(1, sizeof(rb_step));
    rb_transfer *tr = calloc((size_t)l->batch + 1, sizeof(rb_transfer));
    if (step == NULL || tr == NULL) {
        free(step);
        free(tr);
        return RB_NO_MEMORY;
    }
    *step = (rb_step){.seconds = seconds, .order = NULL, .finished = 0, .status = UCS_OK};
    char *in = scratch;
    int started = 0; /* whether any request of the step was posted */
    if ((rc = rb_blocks_ready(worker, l, scratch, timeout, dead_pid, ucx_status)) != RB_OK)
        goto done;
    started = 1;
    for (int t = 0; t < l->batch; t++) {
        tr[t] = (rb_transfer){.step = step, .index = t, .remaining = 1, .start = 0};
        tr[t].remaining += l->first[t + 1] - l->first[t] + (op == RB_PUT || op == RB_TAG);
        if (op == RB_TAG)
            post_part_recv(worker, in + 8 * (t + 1), 8, l->done_tag | (ucp_tag_t)t, SIGNAL_MEMORY, &tr[t]);
    }
    double began = now();
    for (int t = 0; t < l->batch; t++) {
        tr[t].start = now();
        for (int k = l->first[t]; k < l->first[t + 1]; k++) {
            post_block(op, l, k, &tr[t]);
            /* A planted slow transfer (the test suite's): the first one stalls after its first request. */
            for (double until = now() + stall; k == 0 && stall > 0 && now() < until;)
                ucp_worker_progress(worker);
        }
        post_seconds[t] = now() - tr[t].start;
        if (op == RB_PUT)
            post_part_flush(l->ep, &tr[t]);
        transfer_part(&tr[t], UCS_OK); /* posted: its last request may now complete it */
    }
    if ((rc = wait_transfers(worker, step, l->batch, &began, timeout, &pid, dead_pid, ucx_status)) != RB_OK)
        goto done;
    *step_seconds = now() - began;
    if (op != RB_TAG)
        rc = rb_blocks_done(worker, l, signal, timeout, dead_pid, ucx_status);
done:
    if (!started || step->finished == l->batch) { /* nothing in flight refers to them */
        free(step);
        free(tr);
    }
    return rc;
}

/* A tagged receiver's step: every block's receive posted, READY, and each transfer's ACK sent once
 * its blocks have landed (in the order transfers land: `order`, filled by their callbacks). */
static int blocks_received(ucp_worker_h worker, const rb_blocks_link *l, void *signal, double timeout, int *dead_pid,
                           int *ucx_status, rb_step *step, rb_transfer *tr, void **acks)
{
    int pid = l->peer_pid, rc = RB_OK;
    for (int t = 0; t < l->batch; t++) {
        tr[t] = (rb_transfer){.step = step, .index = t, .remaining = l->first[t + 1] - l->first[t] + 1, .start = 0};
        for (int k = l->first[t]; k < l->first[t + 1]; k++)
            post_part_recv(worker, l->pool + l->offsets[k], l->lengths[k], l->data_tag | (ucp_tag_t)k, l->memory_type,
                           &tr[t]);
        transfer_part(&tr[t], UCS_OK);
    }
    void *ready = post_send(l->ep, signal, 8, l->ready_tag, SIGNAL_MEMORY);
    double began = now(), next_check = began + LIVENESS_PERIOD;
    unsigned polls = 0;
    int acked = 0;
    while (acked < l->batch && rc == RB_OK) {
        for (; acked < step->finished; acked++) {
            int t = step->order[acked];
            acks[t] = post_send(l->ep, signal, 8, l->done_tag | (ucp_tag_t)t, SIGNAL_MEMORY);
        }
        if (step->status != UCS_OK) {
            *ucx_status = step->status;
            return RB_UCX_ERROR;
        }
        if (acked < l->batch)
            rc = poll_step(worker, &polls, &began, &next_check, timeout, &pid, 1, dead_pid);
    }
    if (rc == RB_OK)
        rc = wait_all(worker, &ready, 1, timeout, &pid, 1, dead_pid, ucx_status);
    if (rc == RB_OK)
        rc = wait_all(worker, acks, l->batch, timeout, &pid, 1, dead_pid, ucx_status);
    return rc;
}

/* The other end's step: a one-sided target says READY and waits for DONE; a tagged receiver
 * acknowledges each transfer once its blocks have landed (blocks_received). As in rb_blocks_active,
 * a step that ends early leaves what its requests' callbacks refer to allocated. */
int rb_blocks_passive(ucp_worker_h worker, int op, const rb_blocks_link *l, void *signal, void *scratch, double timeout,
                      int *dead_pid, int *ucx_status)
{
    int pid = l->peer_pid;
    void *pair[2];
    if (op != RB_TAG) {
        pair[0] = post_recv(worker, scratch, 8, l->done_tag, SIGNAL_MEMORY);
        pair[1] = post_send(l->ep, signal, 8, l->ready_tag, SIGNAL_MEMORY);
        return wait_all(worker, pair, 2, timeout, &pid, 1, dead_pid, ucx_status);
    }
    rb_step *step = calloc(1, sizeof(rb_step));
    rb_transfer *tr = calloc((size_t)l->batch + 1, sizeof(rb_transfer));
    int *order = calloc((size_t)l->batch + 1, sizeof(int));
    void **acks = calloc((size_t)l->batch + 1, sizeof(void *));
    int rc = RB_NO_MEMORY;
    if (step != NULL && tr != NULL && order != NULL && acks != NULL) {
        *step = (rb_step){.seconds = NULL, .order = order, .finished = 0, .status = UCS_OK};
        rc = blocks_received(worker, l, signal, timeout, dead_pid, ucx_status, step, tr, acks);
    }
    if (rc == RB_NO_MEMORY || step->finished == l->batch) { /* nothing in flight refers to them */
        free(step);
        free(tr);
        free(order);
    }
    free(acks);
    return rc;
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
