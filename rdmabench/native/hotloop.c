/* rdmabench's native hot loop: one timed step of the bw, bibw and lat tests, on the UCP worker and
 * endpoint that UCXX created. Python keeps everything else (patterns, checks, calibration,
 * statistics); only the part between the start and the stop of the clock runs here, so the figure
 * is the link's and not the interpreter's.
 *
 * The protocol is the one measure.py speaks, message for message: the receiver pre-posts its
 * receives and sends READY; the sender's clock starts when READY has arrived and stops when the
 * receiver's ACK (sent once every message has landed) arrives.
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
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <ucp/api/ucp.h>

enum { RB_OK = 0, RB_TIMEOUT = 1, RB_PEER_GONE = 2, RB_UCX_ERROR = 3, RB_NO_MEMORY = 4, RB_INTERRUPTED = 5 };

typedef int (*rb_check_signals_fn)(void);
static rb_check_signals_fn check_signals;

void rb_init(rb_check_signals_fn check) { check_signals = check; }

#define POLLS_PER_CLOCK_READ 64
#define LIVENESS_PERIOD 0.25
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

/* Poll until every request in `requests` has completed; each is freed and set to NULL. */
static int wait_all(ucp_worker_h worker, void **requests, int count, double timeout, int peer_pid, int *ucx_status)
{
    int index = 0;
    unsigned polls = 0;
    double started = 0, next_check = 0;
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
        ucp_worker_progress(worker);
        if (++polls % POLLS_PER_CLOCK_READ == 0) {
            double t = now();
            if (started == 0) {
                started = t;
                next_check = t + LIVENESS_PERIOD;
            } else if (t >= next_check) {
                next_check = t + LIVENESS_PERIOD;
                if (check_signals != NULL && check_signals() != 0)
                    return RB_INTERRUPTED; /* the handler's exception is set: ctypes raises it */
                if (t - started > timeout || (peer_pid > 0 && kill(peer_pid, 0) != 0 && errno == ESRCH)) {
                    /* Leave the rest in flight: the job is about to end. */
                    return t - started > timeout ? RB_TIMEOUT : RB_PEER_GONE;
                }
            }
        }
    }
    return failed;
}

/* bw, sender: wait for READY, send `count` messages, stop the clock at the receiver's ACK. */
int rb_bw_send(ucp_worker_h worker, ucp_ep_h ep, void **buffers, size_t size, int memory_type, int count, ucp_tag_t data_tag,
               ucp_tag_t ready_tag, ucp_tag_t ack_tag, void *ready_in, void *ack_in, double timeout, int peer_pid,
               double *seconds, int *ucx_status)
{
    void **requests = malloc(sizeof(void *) * (size_t)(count + 1));
    if (requests == NULL)
        return RB_NO_MEMORY;
    void *ack = post_recv(worker, ack_in, 8, ack_tag, SIGNAL_MEMORY);
    void *ready = post_recv(worker, ready_in, 8, ready_tag, SIGNAL_MEMORY);
    int rc = wait_all(worker, &ready, 1, timeout, peer_pid, ucx_status);
    if (rc == RB_OK) {
        double start = now();
        for (int k = 0; k < count; k++)
            requests[k] = post_send(ep, buffers[k], size, data_tag | (ucp_tag_t)k, memory_type);
        requests[count] = ack;
        rc = wait_all(worker, requests, count + 1, timeout, peer_pid, ucx_status);
        *seconds = now() - start;
    }
    free(requests);
    return rc;
}

/* bw, receiver: pre-post `count` receives, say READY, acknowledge once every message has landed. */
int rb_bw_recv(ucp_worker_h worker, ucp_ep_h ep, void **buffers, size_t size, int memory_type, int count, ucp_tag_t data_tag,
               ucp_tag_t ready_tag, ucp_tag_t ack_tag, void *signal, double timeout, int peer_pid, int *ucx_status)
{
    void **requests = malloc(sizeof(void *) * (size_t)(count + 1));
    if (requests == NULL)
        return RB_NO_MEMORY;
    for (int k = 0; k < count; k++)
        requests[k] = post_recv(worker, buffers[k], size, data_tag | (ucp_tag_t)k, memory_type);
    requests[count] = post_send(ep, signal, 8, ready_tag, SIGNAL_MEMORY);
    int rc = wait_all(worker, requests, count + 1, timeout, peer_pid, ucx_status);
    if (rc == RB_OK) {
        void *ack = post_send(ep, signal, 8, ack_tag, SIGNAL_MEMORY);
        rc = wait_all(worker, &ack, 1, timeout, peer_pid, ucx_status);
    }
    free(requests);
    return rc;
}

/* lat, the side that times: wait for READY, send the ping, stop the clock when the pong is in. */
int rb_lat_ping(ucp_worker_h worker, ucp_ep_h ep, void *out, void *in, size_t size, int memory_type, ucp_tag_t out_tag,
                ucp_tag_t in_tag, ucp_tag_t ready_tag, void *ready_in, double timeout, int peer_pid, double *seconds,
                int *ucx_status)
{
    void *requests[2];
    requests[1] = post_recv(worker, in, size, in_tag, memory_type);
    void *ready = post_recv(worker, ready_in, 8, ready_tag, SIGNAL_MEMORY);
    int rc = wait_all(worker, &ready, 1, timeout, peer_pid, ucx_status);
    if (rc != RB_OK)
        return rc;
    double start = now();
    requests[0] = post_send(ep, out, size, out_tag, memory_type);
    rc = wait_all(worker, requests, 2, timeout, peer_pid, ucx_status);
    *seconds = now() - start;
    return rc;
}

/* lat, the echoing side: pre-post the ping's receive, say READY, answer the ping. */
int rb_lat_pong(ucp_worker_h worker, ucp_ep_h ep, void *out, void *in, size_t size, int memory_type, ucp_tag_t out_tag,
                ucp_tag_t in_tag, ucp_tag_t ready_tag, void *signal, double timeout, int peer_pid, int *ucx_status)
{
    void *ping = post_recv(worker, in, size, in_tag, memory_type);
    void *ready = post_send(ep, signal, 8, ready_tag, SIGNAL_MEMORY);
    int rc = wait_all(worker, &ready, 1, timeout, peer_pid, ucx_status);
    if (rc == RB_OK)
        rc = wait_all(worker, &ping, 1, timeout, peer_pid, ucx_status);
    if (rc == RB_OK) {
        void *pong = post_send(ep, out, size, out_tag, memory_type);
        rc = wait_all(worker, &pong, 1, timeout, peer_pid, ucx_status);
    }
    return rc;
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

/* bibw, both ranks: pre-post the peer's window, exchange READY, send this rank's window,
 * acknowledge the peer's window once it has landed, and stop this direction's clock when the
 * peer's acknowledgement of ours arrives. Returns once both directions are done. */
int rb_bibw(ucp_worker_h worker, ucp_ep_h ep, void **send_buffers, void **recv_buffers, size_t size, int memory_type,
            int count, const ucp_tag_t *tags, void *signal, void *ready_in, void *ack_in, double timeout, int peer_pid,
            double *seconds, int *ucx_status)
{
    /* tags: data out, data in, READY out, READY in, ACK out, ACK in */
    void **incoming = malloc(sizeof(void *) * (size_t)count);
    void **outgoing = malloc(sizeof(void *) * (size_t)count);
    int rc = RB_OK;
    if (incoming == NULL || outgoing == NULL) {
        free(incoming);
        free(outgoing);
        return RB_NO_MEMORY;
    }
    for (int k = 0; k < count; k++)
        incoming[k] = post_recv(worker, recv_buffers[k], size, tags[1] | (ucp_tag_t)k, memory_type);
    void *ack = post_recv(worker, ack_in, 8, tags[5], SIGNAL_MEMORY);
    void *ready[2] = {post_recv(worker, ready_in, 8, tags[3], SIGNAL_MEMORY), post_send(ep, signal, 8, tags[2], SIGNAL_MEMORY)};
    rc = wait_all(worker, ready, 2, timeout, peer_pid, ucx_status);
    if (rc == RB_OK) {
        double start = now(), acked_at = 0, started = start, next_check = start + LIVENESS_PERIOD;
        for (int k = 0; k < count; k++)
            outgoing[k] = post_send(ep, send_buffers[k], size, tags[0] | (ucp_tag_t)k, memory_type);
        int landed = 0, sent = 0, ack_posted = 0;
        void *ack_out = NULL;
        unsigned polls = 0;
        for (;;) {
            int r;
            while (landed < count && (r = settle(&incoming[landed], ucx_status)) != 0) {
                if (r < 0) { rc = RB_UCX_ERROR; goto done; }
                landed++;
            }
            if (landed == count && !ack_posted) {
                ack_out = post_send(ep, signal, 8, tags[4], SIGNAL_MEMORY);
                ack_posted = 1;
            }
            if (acked_at == 0) {
                if ((r = settle(&ack, ucx_status)) < 0) { rc = RB_UCX_ERROR; goto done; }
                if (r > 0)
                    acked_at = now();
            }
            while (sent < count && (r = settle(&outgoing[sent], ucx_status)) != 0) {
                if (r < 0) { rc = RB_UCX_ERROR; goto done; }
                sent++;
            }
            if (ack_posted && ack_out != NULL) {
                if ((r = settle(&ack_out, ucx_status)) < 0) { rc = RB_UCX_ERROR; goto done; }
            }
            if (ack_posted && ack_out == NULL && acked_at != 0 && sent == count)
                break;
            ucp_worker_progress(worker);
            if (++polls % POLLS_PER_CLOCK_READ == 0) {
                double t = now();
                if (t >= next_check) {
                    next_check = t + LIVENESS_PERIOD;
                    if (check_signals != NULL && check_signals() != 0) { rc = RB_INTERRUPTED; goto done; }
                    if (t - started > timeout) { rc = RB_TIMEOUT; goto done; }
                    if (peer_pid > 0 && kill(peer_pid, 0) != 0 && errno == ESRCH) { rc = RB_PEER_GONE; goto done; }
                }
            }
        }
        *seconds = acked_at - start;
    }
done:
    free(incoming);
    free(outgoing);
    return rc;
}

const char *rb_status_string(int ucx_status)
{
    return ucs_status_string((ucs_status_t)ucx_status);
}
