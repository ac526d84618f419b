# What the CUDA emulator's operation trace (GEARBOX_CUDA_EMU_TRACE) says about the overlap
# of the gradient all-reduces with backward, for the tests that train on the emulated GPU
# with comm/nccl (tests/comm/test_overlap_emu.sh, tests/ddp/test_ddp_nccl_emu.sh).
# usage: source overlap_trace.sh; facts=$(analyse TRACE); fact NAME "$facts"

# analyse TRACE: one line of facts about the first training step's all-reduces (those
# queued before the compute stream first waits on the collectives' stream), or "error ...".
# Work: every operation but event records and waits (kernels, matmuls, copies).
analyse() {
    awk '
    $1 == "queue" {
        q++; s = $3; n = substr($4, 2) + 0; what = $5
        qline[s, n] = q
        if (what == "kernel" && compute == "") compute = s
        if (what == "ncclAllReduce" && !finish) {
            comm = s; nar++; ar[nar] = n; ready[nar] = prev_wait_on[s]
            ar_q[nar] = q
        }
        work = what != "cudaStreamWaitEvent" && what != "cudaEventRecord"
        if (what == "cudaStreamWaitEvent") {
            prev_wait_on[s] = substr($9, 2) + 0
            if (s == compute && $8 == comm && nar > 0 && (!finish || !work_after_finish)) {
                if (!finish) { finish = q; finish_seq = n }
                cwaits++
            }
        }
        if (s == compute && work) {
            kernels++; kq[kernels] = q; kseq[kernels] = n
            if (finish) work_after_finish = 1
        }
    }
    $1 == "run" { ran[$4, substr($5, 2) + 0] = $2 }
    END {
        if (nar == 0 || compute == "") { print "error: no all-reduce or no kernel traced"; exit }
        if (!finish) { finish = q + 1; finish_seq = 1e18 }   # no waits: all on one stream
        same = comm == compute
        # work queued on the compute stream after bucket 1 all-reduce, before finish
        later = 0
        for (k = 1; k <= kernels; k++) if (kq[k] > ar_q[1] && kq[k] < finish) later++
        # compute waits on the collectives stream inside backward: between the first
        # and the last bucket ready record
        inside = 0
        # work of backward still queued when bucket 1 all-reduce ran
        queued_at_run = 0
        for (k = 1; k <= kernels; k++)
            if (kseq[k] > ready[1] && kseq[k] < finish_seq && ran[compute, kseq[k]] > ran[comm, ar[1]])
                queued_at_run++
        # backward work queued after an all-reduce that ran before it
        overtaken = 0
        for (i = 1; i <= nar; i++)
            for (k = 1; k <= kernels; k++)
                if (kq[k] > ar_q[i] && kseq[k] < finish_seq && ran[compute, kseq[k]] < ran[comm, ar[i]])
                    overtaken++
        # first compute work after finish (the optimizer): every all-reduce ran before it
        opt = 0
        for (k = 1; k <= kernels; k++) if (kseq[k] > finish_seq) { opt = ran[compute, kseq[k]]; break }
        late = 0
        for (i = 1; i <= nar; i++) if (ran[comm, ar[i]] > opt) late++
        printf "all_reduces=%d same_stream=%d finish_waits=%d later_kernels=%d queued_at_run=%d overtaken=%d late=%d optimizer_run=%d\n",
            nar, same, cwaits, later, queued_at_run, overtaken, late, opt
    }' "$1"
}

# fact NAME FACTS: the value of NAME= in FACTS
fact() { sed -nE "s/.*(^| )$1=([0-9]+).*/\2/p" <<< "$2"; }
