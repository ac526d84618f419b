/* gearbox/toolkit/comm_checks.h: what every comm plugin of gearbox checks the same way:
 * the arguments of all_reduce_start (and of reduce_scatter_start, the same), all_gather
 * and broadcast, and room for one more outstanding request. Part of the plugin toolkit (docs/plugin-guide.md): header-only, outside the
 * ABI, compiled into each plugin; nothing here prints or allocates: reasons go through
 * set_error().
 */
#ifndef GEARBOX_TOOLKIT_COMM_CHECKS_H
#define GEARBOX_TOOLKIT_COMM_CHECKS_H

#include "gearbox/comm.h"

/* GB_OK when there is a request pointer, a buffer of count >= 0, a known dtype and a
 * known op; else GB_ERR_INVALID_ARG with the host told which. */
static inline gb_status gb_comm_check_all_reduce(const gb_host *host, const void *buf,
                                                 int64_t count, gb_dtype dtype, gb_reduce_op op,
                                                 const gb_comm_request *request)
{
    if (!request || count < 0 || (count > 0 && !buf)) {
        host->set_error(host, "all_reduce: needs a request pointer and a buffer of count >= 0");
        return GB_ERR_INVALID_ARG;
    }
    if (gb_dtype_size(dtype) == 0 || (op != GB_REDUCE_SUM && op != GB_REDUCE_AVG)) {
        host->set_error(host, "all_reduce: unknown dtype %d or reduce op %d", (int)dtype, (int)op);
        return GB_ERR_INVALID_ARG;
    }
    return GB_OK;
}

/* all_gather's arguments (ABI 1.8): a count >= 0, buffers for a count > 0 and a known
 * dtype; else GB_ERR_INVALID_ARG with the host told which. */
static inline gb_status gb_comm_check_all_gather(const gb_host *host, const void *send,
                                                 const void *recv, int64_t send_count,
                                                 gb_dtype dtype)
{
    if (send_count < 0 || (send_count > 0 && (!send || !recv))) {
        host->set_error(host, "all_gather: needs send and recv buffers and a count >= 0");
        return GB_ERR_INVALID_ARG;
    }
    if (gb_dtype_size(dtype) == 0) {
        host->set_error(host, "all_gather: unknown dtype %d", (int)dtype);
        return GB_ERR_INVALID_ARG;
    }
    return GB_OK;
}

/* GB_OK while fewer than GB_COMM_MAX_INFLIGHT requests are outstanding. */
static inline gb_status gb_comm_check_room(const gb_host *host, int outstanding)
{
    if (outstanding < GB_COMM_MAX_INFLIGHT)
        return GB_OK;
    host->set_error(host, "all_reduce: %d requests already outstanding (the limit)",
                    GB_COMM_MAX_INFLIGHT);
    return GB_ERR_INVALID_ARG;
}

/* GB_OK when `root` is a rank of a world of `world` and a buffer is given for bytes > 0;
 * else GB_ERR_INVALID_ARG with the host told which. */
static inline gb_status gb_comm_check_broadcast(const gb_host *host, const void *buf,
                                                size_t bytes, int root, int world)
{
    if (root < 0 || root >= world) {
        host->set_error(host, "broadcast: root %d does not exist in a world of %d", root,
                        world);
        return GB_ERR_INVALID_ARG;
    }
    if (bytes > 0 && !buf) {
        host->set_error(host, "broadcast: NULL buffer of %zu bytes", bytes);
        return GB_ERR_INVALID_ARG;
    }
    return GB_OK;
}

#endif /* GEARBOX_TOOLKIT_COMM_CHECKS_H */
