/* The native loop's block lists (KV-cache shaped transfers).
 *
 * One transfer moves its descriptors (first[t] .. first[t + 1] - 1: blocks, or runs of blocks adjacent
 * at both ends, of lengths[k] bytes) between slots of two pools, as puts (then an endpoint flush),
 * gets or tagged messages; `batch` transfers are posted back to back per step. The
 * initiator (the sender for tagged messages) times each transfer from the start of its posting to
 * its completion: the flush (put), its last get, or the receiver's ACK of its last block (tagged),
 * and how long the posting itself took. Offsets are byte offsets into each pool, transfer by
 * transfer. `stall` > 0 plants a slow first transfer (RDMABENCH_FAULT=slow:N). */
#include <stdint.h>
#include <stdlib.h>
#include <ucp/api/ucp.h>

#include "hotloop.h"
#include "hotloop_parts.h"

static void *post_block(int op, const rb_blocks_link *l, int k)
{
    ucp_request_param_t param;
    describe(&param, l->memory_type);
    void *local = l->pool + l->offsets[k];
    size_t length = l->lengths[k];
    if (op == RB_TAG)
        return ucp_tag_send_nbx(l->ep, local, length, l->data_tag | (ucp_tag_t)k, &param);
    uint64_t remote = l->remote_pool + l->remote_offsets[k];
    if (op == RB_PUT)
        return ucp_put_nbx(l->ep, local, length, remote, l->rkey, &param);
    return ucp_get_nbx(l->ep, local, length, remote, l->rkey, &param);
}

typedef struct {
    int settled; /* descriptors of the transfer whose request completed, in order */
    void *flush; /* put: the flush posted after the transfer's blocks */
    void *ack;   /* tagged: the receiver's ACK of the transfer */
    double start;
    int done;
} rb_transfer;

/* Poll every unfinished transfer once; returns how many are finished, -1 on failure. */
static int poll_transfers(int op, const rb_blocks_link *l, void **requests, rb_transfer *tr, double *seconds,
                          int *ucx_status)
{
    int finished = 0, r;
    for (int t = 0; t < l->batch; t++) {
        rb_transfer *x = &tr[t];
        if (x->done) {
            finished++;
            continue;
        }
        void **mine = requests + l->first[t];
        int posted = l->first[t + 1] - l->first[t];
        while (x->settled < posted && (r = settle(&mine[x->settled], ucx_status)) != 0) {
            if (r < 0)
                return -1;
            x->settled++;
        }
        int complete = x->settled == posted;
        if (op == RB_PUT || op == RB_TAG) {
            void **waited = op == RB_PUT ? &x->flush : &x->ack;
            if ((r = settle(waited, ucx_status)) < 0)
                return -1;
            complete = complete && r > 0;
        }
        if (complete) {
            seconds[t] = now() - x->start;
            x->done = 1;
            finished++;
        }
    }
    return finished;
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

/* The initiator's step: `post_seconds[t]`, `seconds[t]` per transfer, `step_seconds` for all. */
int rb_blocks_active(ucp_worker_h worker, int op, const rb_blocks_link *l, void *signal, void *scratch, double timeout,
                     double stall, double *post_seconds, double *seconds, double *step_seconds, int *dead_pid,
                     int *ucx_status)
{
    size_t total = (size_t)l->first[l->batch];
    int pid = l->peer_pid, rc = RB_OK;
    void **requests = calloc(total + 1, sizeof(void *));
    rb_transfer *tr = calloc((size_t)l->batch + 1, sizeof(rb_transfer));
    if (requests == NULL || tr == NULL) {
        rc = RB_NO_MEMORY;
        goto done;
    }
    char *in = scratch;
    if ((rc = rb_blocks_ready(worker, l, scratch, timeout, dead_pid, ucx_status)) != RB_OK)
        goto done;
    if (op == RB_TAG)
        for (int t = 0; t < l->batch; t++)
            tr[t].ack = post_recv(worker, in + 8 * (t + 1), 8, l->done_tag | (ucp_tag_t)t, SIGNAL_MEMORY);
    double began = now(), next_check = began + LIVENESS_PERIOD;
    for (int t = 0; t < l->batch; t++) {
        tr[t].start = now();
        for (int k = l->first[t]; k < l->first[t + 1]; k++) {
            requests[k] = post_block(op, l, k);
            /* A planted slow transfer (the test suite's): the first one stalls after its first request. */
            for (double until = now() + stall; k == 0 && stall > 0 && now() < until;)
                ucp_worker_progress(worker);
        }
        post_seconds[t] = now() - tr[t].start;
        if (op == RB_PUT)
            tr[t].flush = post_flush(l->ep);
    }
    unsigned polls = 0;
    int finished;
    while ((finished = poll_transfers(op, l, requests, tr, seconds, ucx_status)) < l->batch) {
        if (finished < 0) {
            rc = RB_UCX_ERROR;
            goto done;
        }
        if ((rc = poll_step(worker, &polls, &began, &next_check, timeout, &pid, 1, dead_pid)) != RB_OK)
            goto done;
    }
    *step_seconds = now() - began;
    if (op != RB_TAG)
        rc = rb_blocks_done(worker, l, signal, timeout, dead_pid, ucx_status);
done:
    free(requests);
    free(tr);
    return rc;
}

/* The other end's step: a one-sided target says READY and waits for DONE; a tagged receiver posts
 * every block's receive, says READY, and acknowledges each transfer once its blocks have landed. */
int rb_blocks_passive(ucp_worker_h worker, int op, const rb_blocks_link *l, void *signal, void *scratch, double timeout,
                      int *dead_pid, int *ucx_status)
{
    int pid = l->peer_pid, rc = RB_OK;
    void *pair[2];
    if (op != RB_TAG) {
        pair[0] = post_recv(worker, scratch, 8, l->done_tag, SIGNAL_MEMORY);
        pair[1] = post_send(l->ep, signal, 8, l->ready_tag, SIGNAL_MEMORY);
        return wait_all(worker, pair, 2, timeout, &pid, 1, dead_pid, ucx_status);
    }
    size_t total = (size_t)l->first[l->batch];
    void **requests = calloc(total + 1, sizeof(void *));
    void **acks = calloc((size_t)l->batch + 1, sizeof(void *));
    int *landed = calloc((size_t)l->batch + 1, sizeof(int));
    if (requests == NULL || acks == NULL || landed == NULL) {
        rc = RB_NO_MEMORY;
        goto done;
    }
    for (size_t k = 0; k < total; k++)
        requests[k] = post_recv(worker, l->pool + l->offsets[k], l->lengths[k], l->data_tag | (ucp_tag_t)k,
                                l->memory_type);
    void *ready = post_send(l->ep, signal, 8, l->ready_tag, SIGNAL_MEMORY);
    double began = now(), next_check = began + LIVENESS_PERIOD;
    unsigned polls = 0;
    int acked = 0, r;
    while (acked < l->batch) {
        for (int t = 0; t < l->batch; t++) {
            void **mine = requests + l->first[t];
            int posted = l->first[t + 1] - l->first[t];
            if (landed[t] < 0)
                continue;
            while (landed[t] < posted && (r = settle(&mine[landed[t]], ucx_status)) != 0) {
                if (r < 0) {
                    rc = RB_UCX_ERROR;
                    goto done;
                }
                landed[t]++;
            }
            if (landed[t] == posted) {
                acks[t] = post_send(l->ep, signal, 8, l->done_tag | (ucp_tag_t)t, SIGNAL_MEMORY);
                landed[t] = -1;
                acked++;
            }
        }
        if (acked < l->batch && (rc = poll_step(worker, &polls, &began, &next_check, timeout, &pid, 1, dead_pid)) != RB_OK)
            goto done;
    }
    rc = wait_all(worker, &ready, 1, timeout, &pid, 1, dead_pid, ucx_status);
    if (rc == RB_OK)
        rc = wait_all(worker, acks, l->batch, timeout, &pid, 1, dead_pid, ucx_status);
done:
    free(requests);
    free(acks);
    free(landed);
    return rc;
}
