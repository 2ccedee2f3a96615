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
