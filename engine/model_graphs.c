/* Device graphs (gb_model_use_graphs): the training forward and backward recorded once
 * and launched each step, recorded again when what they were recorded for changes. */
#include "model_internal.h"

/* Runs `work` through graph `g`: the first time as it is (the plugins' first-call set-up,
 * such as cuBLASLt's plans, then happens outside a recording), the second time recorded
 * and the recording launched, from then on by launching it, and recorded again when n or
 * the scalar change. With a profile attached, which times each call on its own, it runs
 * as it is. */
int gb_model_run_recorded(gb_model *m, model_graph *g, int64_t n, float scalar, int variant,
                          graph_work work)
{
    gb_instance *dev = &m->rt->inst[GB_KIND_DEVICE];
    const gb_device_ops *ops = m->rt->dev;
    if (!m->use_graphs || m->profile)
        return work(m, scalar);
    if (!(g->graph && g->n == n && g->scalar == scalar && g->variant == variant)) {
        if (!g->ran) {
            g->ran = 1;
            return work(m, scalar);
        }
        if (g->graph)
            ops->graph_destroy(m->dev, g->graph);
        g->graph = NULL;
        GB_CALL(dev, "graph_begin", ops->graph_begin(m->dev));
        int failed = work(m, scalar);
        gb_status st = ops->graph_end(m->dev, &g->graph);   /* ends the recording either way */
        if (failed || st != GB_OK) {
            if (g->graph)
                ops->graph_destroy(m->dev, g->graph);
            g->graph = NULL;
            return failed ? -1 : gb_call_failed(dev, st, "graph_end");
        }
        g->n = n;
        g->scalar = scalar;
        g->variant = variant;
        m->graph_recordings++;
    }
    GB_CALL(dev, "graph_launch", ops->graph_launch(m->dev, g->graph));
    m->graph_launches++;
    return 0;
}

void gb_model_use_graphs(gb_model *m)
{
    m->use_graphs = 1;
}

void gb_model_graph_counts(const gb_model *m, int64_t *recorded, int64_t *launched)
{
    *recorded = m->graph_recordings;
    *launched = m->graph_launches;
}
