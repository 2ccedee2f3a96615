/* The native hot loop's interface: the structs Python fills (through ctypes) and the codes both
 * sides read. rdmabench/wire/native/mirror.py mirrors these in ctypes; rb_abi() describes them as
 * this compiler laid them out (sizes, field offsets, constants), and the loader refuses a library
 * whose description differs from the mirror's, so the two cannot drift apart silently. */
#ifndef RDMABENCH_HOTLOOP_H
#define RDMABENCH_HOTLOOP_H

#include <stddef.h>
#include <stdint.h>
#include <ucp/api/ucp.h>

/* What every function returns (RB_UCX_ERROR: the UCX status is in *ucx_status). */
enum { RB_OK = 0, RB_TIMEOUT = 1, RB_PEER_GONE = 2, RB_UCX_ERROR = 3, RB_NO_MEMORY = 4, RB_INTERRUPTED = 5 };

/* The operations of one-sided and block-list steps (RB_TAG: block lists as tagged messages). */
enum { RB_PUT = 0, RB_GET = 1, RB_TAG = 2 };

/* One end of a link in a window round (bw, bibw, every concurrent pattern). */
typedef struct {
    ucp_ep_h ep;
    int peer_pid; /* the peer's pid when it runs on this host, else 0 */
    int count;    /* messages per step on this link */
    int slots;    /* buffers, and messages in flight at most: message m uses buffer m % slots */
    int memory_type;
    size_t size;
    void **buffers;
    ucp_tag_t data_tag;
    ucp_tag_t ready_tag;
    ucp_tag_t ack_tag;
} rb_link;

/* One end of a one-sided link (put, get, put-lat). */
typedef struct {
    ucp_ep_h ep;
    int peer_pid;
    int count;
    int memory_type;
    size_t size;
    void **buffers;     /* this end's buffers (active: sources of puts, destinations of gets) */
    uint64_t *remote;   /* active: the peer's buffer addresses */
    ucp_rkey_h *rkeys;  /* active: their remote keys */
    ucp_tag_t ready_tag; /* active receives it, passive sends it */
    ucp_tag_t done_tag;  /* active sends it, passive receives it */
} rb_rma_link;

/* One end of a link moving block lists (--blocks). A descriptor is one request: a block, or blocks
 * adjacent at both ends merged into one (as NIXL's makeXferReq merges them). */
typedef struct {
    ucp_ep_h ep;
    int peer_pid;
    int memory_type;
    int batch;
    const int *first;         /* batch + 1 entries: transfer t posts descriptors first[t] .. first[t + 1] - 1 */
    char *pool;
    const uint64_t *offsets;  /* each descriptor's byte offset into this end's pool */
    const uint64_t *lengths;  /* each descriptor's bytes (whole blocks) */
    uint64_t remote_pool;
    const uint64_t *remote_offsets;
    ucp_rkey_h rkey;
    ucp_tag_t ready_tag;
    ucp_tag_t done_tag; /* one-sided: DONE to the target; tagged: ACK of transfer t is done_tag | t */
    ucp_tag_t data_tag; /* tagged: descriptor k of the step is data_tag | k */
} rb_blocks_link;

/* The layout above as this compiler made it: "name=value" items separated by ';' (structs as
 * "rb_link=SIZE" then "rb_link.FIELD=OFFSET"; constants as "RB_OK=0"). */
const char *rb_abi(void);

#endif
