/* What the fake CUDA runtime and NCCL of fake_nccl.c saw, for the test that preloads it
 * under comm-nccl. The test finds it with dlsym(RTLD_DEFAULT, FAKE_NCCL_LOG_SYMBOL), so a
 * run without the preload is told apart from a broken plugin. */
#ifndef GB_TESTS_FAKE_NCCL_H
#define GB_TESTS_FAKE_NCCL_H

#include <stddef.h>

#define FAKE_NCCL_LOG_SYMBOL "fake_nccl_get_log"

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
} fake_nccl_log;

/* The log, shared by every caller in the process. */
typedef fake_nccl_log *(*fake_nccl_log_fn)(void);

#endif
