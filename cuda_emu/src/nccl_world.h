/* The ranks of an emulated NCCL communicator of more than one rank: separate processes,
 * each an emulated GPU, meeting in a POSIX shared-memory segment named by the unique id
 * (nccl_world.cc). nccl.cc checks a call's arguments and queues its collective on the
 * stream; the queued work calls world_exchange, which moves the data between the ranks
 * when the stream reaches it.
 */
#ifndef GB_EMU_NCCL_WORLD_H
#define GB_EMU_NCCL_WORLD_H

#include <nccl.h>

#include <atomic>
#include <cstddef>
#include <string>

namespace gb_emu {

struct nccl_world;

/* The most ranks a world may have. */
constexpr int NCCL_WORLD_MAX_RANKS = 16;

/* Writes a fresh unique id: a marker and a random token that names the segment. false
 * (with why in *error) when there is no random source. */
bool nccl_world_make_id(ncclUniqueId *id, std::string *error);

/* Joins the world that `id` names as `rank` of `nranks` on GPU `device`; the segment is
 * made by whichever rank comes first. nullptr with why in *error. */
nccl_world *nccl_world_join(const ncclUniqueId &id, int nranks, int rank, int device,
                            std::string *error);

/* Whether every rank has joined: ncclSuccess; ncclInProgress while some have not;
 * ncclRemoteError (and *error) when a rank left before all joined, ncclInvalidUsage when
 * two ranks claim one GPU. Never blocks. A rank that leaves after all joined is seen by
 * the next collective. */
ncclResult_t nccl_world_ready(nccl_world *w, std::string *error);

/* How a collective's buffers are laid out: the same `count` elements on every side
 * (all-reduce, broadcast), or `count` per rank, nranks of them in send (reduce-scatter:
 * rank r keeps part r of the reduction) or in recv (all-gather: part r is rank r's send). */
enum class exchange_form { whole, reduce_scatter, all_gather };

/* One collective as every rank sees it: each rank's `send`, reduced with `op` in `type`
 * (all-reduce, reduce-scatter) or root's `send` alone (broadcast, root >= 0; all-gather,
 * whose parts are broadcasts from each rank in turn), into each rank's `recv`. `seq`
 * numbers it on its communicator for messages. */
struct nccl_exchange {
    const char *what;       /* "ncclAllReduce", "ncclBroadcast", ... */
    unsigned long long seq;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t type;
    ncclRedOp_t op;
    int root;               /* broadcast: the root; otherwise -1 */
    exchange_form form;
};

/* Whether the emulated world can reduce `type` (fp8 is not emulated beyond one rank). */
bool nccl_world_reduces(ncclDataType_t type);

/* Runs one collective with the other ranks, blocking until all took part: ncclSuccess;
 * ncclRemoteError (and why in *error) when a rank died or left or `aborted` became true
 * meanwhile; ncclInvalidUsage when the ranks disagree on the collective. recv is then
 * partly written at most. */
ncclResult_t nccl_world_exchange(nccl_world *w, const nccl_exchange &x,
                                 const std::atomic<bool> &aborted, std::string *error);

/* Keeps a failed collective in flight until `aborted` (its communicator's abort), as NCCL's
 * kernels stay stuck on a lost peer until ncclCommAbort; parked meanwhile, so other
 * threads' event queries see it unfinished. GEARBOX_CUDA_EMU_NCCL_TIMEOUT_S bounds it for a
 * program that never aborts. */
void nccl_world_hold_until_abort(const std::atomic<bool> &aborted);

/* Leaves the world: the peers' next wait on this rank reports that it left. The segment
 * stays mapped, since work queued before may still run (and finds its communicator
 * aborted). */
void nccl_world_leave(nccl_world *w);

}  // namespace gb_emu

#endif
