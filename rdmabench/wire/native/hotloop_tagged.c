/* The native loop's tagged steps: a window round (bw, bibw, every concurrent pattern), each link
 * streaming its messages through its buffers, and lat's ping-pong. The round protocol is described
 * at the top of hotloop.c. */
#include <stdint.h>
#include <stdlib.h>
#include <ucp/api/ucp.h>

#include "hotloop.h"
#include "hotloop_parts.h"

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

/* Post what a step starts with: each target's ACK and READY receives (`signals`: 16 bytes of scratch
 * a target), each source's first receives and its READY; lay out each link's share of `requests`. */
static void start_round(ucp_worker_h worker, const rb_link *targets, int ntargets, const rb_link *sources,
                        int nsources, rb_progress *progress, void **requests, int *pids, void *signal_out,
                        void *signals, int *ucx_status)
{
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
}

/* One pass over a target: its clock starts at its READY, it streams, its clock stops at its ACK.
 * 1 when it has finished, 0 while not, -1 on failure. */
static int drive_target(ucp_worker_h worker, const rb_link *target, rb_progress *p, double *seconds,
                        int *ucx_status)
{
    int r;
    if (p->state == 0) {
        if ((r = settle(&p->ready, ucx_status)) < 0)
            return -1;
        if (r > 0) {
            p->start = now();
            p->state = 1;
        }
    }
    if (p->state >= 1 && stream(worker, p, target, 1, ucx_status) < 0)
        return -1;
    if (p->state == 1) {
        if ((r = settle(&p->ack, ucx_status)) < 0)
            return -1;
        if (r > 0) {
            *seconds = now() - p->start;
            p->state = 2;
        }
    }
    return p->state == 2 && p->done == target->count;
}

/* One pass over a source: it streams; once its last message has landed it is acknowledged. 1 when
 * it has finished, 0 while not, -1 on failure. */
static int drive_source(ucp_worker_h worker, const rb_link *source, rb_progress *p, void *signal_out,
                        int *ucx_status)
{
    int r;
    if (stream(worker, p, source, 0, ucx_status) < 0 || settle(&p->ready, ucx_status) < 0)
        return -1;
    if (p->state == 0 && p->done == source->count) {
        p->ack = post_send(source->ep, signal_out, 8, source->ack_tag, SIGNAL_MEMORY);
        p->state = 1;
    }
    if (p->state == 1) {
        if ((r = settle(&p->ack, ucx_status)) < 0)
            return -1;
        if (r > 0)
            p->state = 2;
    }
    return p->state == 2 && p->ready == NULL;
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
    start_round(worker, targets, ntargets, sources, nsources, progress, requests, pids, signal_out, signals,
                ucx_status);
    double began = now(), next_check = began + LIVENESS_PERIOD;
    unsigned polls = 0;
    for (;;) {
        int finished = 0, r;
        for (int l = 0; l < nlinks; l++) {
            r = l < ntargets ? drive_target(worker, &targets[l], &progress[l], &seconds[l], ucx_status)
                             : drive_source(worker, &sources[l - ntargets], &progress[l], signal_out, ucx_status);
            if (r < 0) {
                rc = RB_UCX_ERROR;
                goto done;
            }
            finished += r;
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
