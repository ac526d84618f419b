/* What the fake CUDA runtime and NCCL of fake_nccl.c saw, for the test that preloads it
 * under comm-nccl. The test finds it with dlsym(RTLD_DEFAULT, FAKE_NCCL_LOG_SYMBOL), so a
 * run without the preload is told apart from a broken plugin. */
#ifndef GB_TESTS_FAKE_NCCL_H
#define GB_TESTS_FAKE_NCCL_H

#include <stddef.h>

#define FAKE_NCCL_LOG_SYMBOL "fake_nccl_get_log"

/* The stream and event calls, in order (the last FAKE_NCCL_CALLS of them), for the test
 * to check how collectives are ordered against the compute stream. */
#define FAKE_NCCL_CALLS 64
typedef enum fake_call_kind {
    FAKE_RECORD,       /* cudaEventRecord(event, stream) */
    FAKE_WAIT,         /* cudaStreamWaitEvent(stream, event) */
    FAKE_COLLECTIVE,   /* ncclAllReduce or ncclBroadcast on stream */
    FAKE_EVENT_SYNC    /* cudaEventSynchronize(event) */
} fake_call_kind;

typedef struct fake_call {
    fake_call_kind kind;
    const void *event, *stream;
} fake_call;

typedef struct fake_nccl_log {
    int device;                 /* the last cudaSetDevice */
    int inits, finalizes, destroys, aborts;
    int init_blocking, init_nranks, init_rank;
    unsigned char init_id[128]; /* the unique id the last init was given */
    /* the last collective */
    int collectives;
    const void *send;
    void *recv;
    size_t count;
    int type, op, root;         /* ncclDataType_t, ncclRedOp_t; root for broadcast */
    const void *stream;
    /* streams the plugin made and destroyed, the last one made */
    int streams_created, streams_destroyed;
    const void *created_stream;
    int n_calls;                /* calls so far; calls[i % FAKE_NCCL_CALLS] is the i-th */
    fake_call calls[FAKE_NCCL_CALLS];
} fake_nccl_log;

/* The log, shared by every caller in the process. */
typedef fake_nccl_log *(*fake_nccl_log_fn)(void);

#endif
