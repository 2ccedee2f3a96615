/* What the parts of the native loop share (hotloop.c defines them): the clock, the posts, the waits.
 * Not the loop's interface (hotloop.h is): these symbols are hidden, so the library exports only
 * the rb_ functions hotloop.h declares, and no other library's `now` or `settle` can stand in. */
#ifndef RDMABENCH_HOTLOOP_PARTS_H
#define RDMABENCH_HOTLOOP_PARTS_H

#include <stddef.h>
#include <ucp/api/ucp.h>

#define RB_HIDDEN __attribute__((visibility("hidden")))

#define LIVENESS_PERIOD 0.25 /* seconds between a wait's checks of signals, deadline and peers */
#define FULL_MASK ((ucp_tag_t)-1)
#define SIGNAL_MEMORY UCS_MEMORY_TYPE_HOST /* READY, ACK and DONE: 8 bytes of host memory */

/* CLOCK_MONOTONIC in seconds. */
RB_HIDDEN double now(void);
/* A request's parameters declaring the buffers' memory type (-1: UCX looks it up). */
RB_HIDDEN void describe(ucp_request_param_t *param, int memory_type);
RB_HIDDEN void *post_send(ucp_ep_h ep, void *buffer, size_t size, ucp_tag_t tag, int memory_type);
RB_HIDDEN void *post_recv(ucp_worker_h worker, void *buffer, size_t size, ucp_tag_t tag, int memory_type);
/* An endpoint flush: UCX's remote completion of the puts posted before it. */
RB_HIDDEN void *post_flush(ucp_ep_h ep);
/* One poll of a wait (RB_OK, or why the wait ends); `*began` 0 starts its clock. */
RB_HIDDEN int poll_step(ucp_worker_h worker, unsigned *polls, double *began, double *next_check, double timeout,
                        const int *pids, int npids, int *dead_pid);
/* Poll until every request has completed (each freed and set to NULL). */
RB_HIDDEN int wait_all(ucp_worker_h worker, void **requests, int count, double timeout, const int *pids, int npids,
                       int *dead_pid, int *ucx_status);
/* Test one request slot: 1 completed (freed, NULL), 0 in flight, -1 failed (*ucx_status set). */
RB_HIDDEN int settle(void **slot, int *ucx_status);

#endif
