/* The native loop's one-sided steps (RMA): put and get.
 *
 * A link's passive end (the owner of the remote memory: dst for put, src for get) maps its buffers
 * with ucp_mem_map and packs a remote key per buffer; the active end unpacks them against its
 * endpoint and moves the bytes with ucp_put_nbx or ucp_get_nbx. A step: the passive end sends READY
 * (its memory holds what the step needs), the active end starts its clock, posts the window and, for
 * put, an endpoint flush (UCX's remote completion: the bytes are in the target's memory); its clock
 * stops when the flush completes (put) or the last get has landed (get). It then tells the passive
 * end (DONE), which may check or refill its memory. */
#include <stdint.h>
#include <stdlib.h>
#include <ucp/api/ucp.h>

#include "hotloop.h"
#include "hotloop_parts.h"

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
