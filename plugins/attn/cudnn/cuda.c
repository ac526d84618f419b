/* attn/cudnn: causal (or full) multi-head attention forward and backward by cuDNN 9's fused
 * flash attention, for bf16 and f16 with f32 accumulation inside cuDNN.
 *
 * The plugin has no kernels of its own. It describes the attention as a cuDNN operation
 * graph through the backend API (cudnn_graph.h), the same graph of matmul, pointwise and
 * reduction operations the cuDNN frontend's sdpa nodes expand into, which cuDNN recognises
 * and runs as one fused kernel:
 *   forward:  S = (Q K^T) * scale; causal: S = select(row >= col, S, fill); softmax with its
 *             statistics (m = max S, e = exp(S - m), l = sum e, saved LSE = m + log l,
 *             P = e / l in the io dtype); O = P V.
 *   backward: r = rowsum(dO * O) (into the workspace); P = exp(S - LSE), masked after the
 *             subtraction; dV = P^T dO; dS = P * (dO V^T - r) * scale; dK = dS^T Q;
 *             dQ = dS K (K^T and P^T, dS^T by reshape operations, the frontend's way).
 * Q, K, V, O and the gradients are the contract's views with their own strides (sdpa_shapes.h
 * says how each becomes a cuDNN tensor); nothing is copied. P, S and dS are virtual: they
 * never exist in memory. The graphs and their execution plans are built once per problem
 * and view strides (memory() builds them for the core's packed layout and for contiguous
 * views; a call with other strides builds its own the first time) and cached, the least
 * recently used giving way (sdpa_victim_slot), so a plan just fetched is never evicted by
 * the next one built. Each plan runs the first engine, in the order of heuristics mode A
 * then the fallback list, that builds a plan and that cuDNN's numerical notes call
 * deterministic; only when none does, the first whose notes cuDNN cannot report (logged
 * as a warning naming the engine); never one noted nondeterministic (sdpa_engine_order).
 * The cuDNN handle runs on the device's compute stream; calls queue their work there and
 * return.
 *
 * Memory: saved is the log-sum-exp, B*H*T f32 per layer. The workspace is the larger of
 * the forward plan's scratch and the backward plan's scratch plus rowsum(dO * O) (B*H*T
 * f32). cuDNN's backward keeps dP in its scratch (by the frontend's estimate B*H*T^2 16-bit
 * values, T rounded up to 64): its deterministic form, chosen over the one that adds dQ
 * with atomics. Each call creates one variant-pack descriptor (host memory only).
 *
 * Eligibility (sdpa_eligible): bf16 or f16, cuDNN >= 9.0 at run time, compute capability
 * >= 8.0, head_dim a multiple of 8 and <= 128 (256 on Hopper), T >= 2, and with cuDNN
 * <= 9.15.0 T a multiple of 128. Left out: dropout, bias, padding masks, f32, and cuDNN's
 * newer single-operation SDPA descriptors. Not yet run on a GPU.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <cuda_runtime.h>
#include <cudnn.h>

#include "gearbox/toolkit/attn_checks.h"
#include "cuda_status.h"
#include "sdpa_shapes.h"
#include "gearbox/attn.h"

#define PLUGIN SDPA_PLUGIN
#define CUDNN_CHECK(call) GB_CUDA_LIB_CHECK(cudnnStatus_t, call, cudnnGetErrorString)

#define PLAN_CACHE 32   /* plans kept; the least recently used goes when a new one needs room */
#define MAX_DESCS 320   /* descriptors one graph, its engine search and its plan hold */
#define MAX_OPS 32      /* operations of one graph */
#define MAX_CONFIGS 16  /* engine configurations asked of the heuristics per mode */

/* Unique ids of the tensors a variant pack binds; virtual tensors number from VIRTUAL. */
enum {
    UID_Q = 1, UID_K, UID_V, UID_O, UID_DO, UID_DQ, UID_DK, UID_DV, UID_STATS, UID_ROWSUM,
    UID_SCALE, UID_FILL, UID_ONE, UID_VIRTUAL = 100
};

/* One graph under construction, and after planning the descriptors its plan rests on. */
typedef struct graph {
    const gb_host *host;
    cudnnHandle_t handle;
    cudnnDataType_t io;   /* bf16 or f16: Q, K, V, O, their gradients, P and dS^T */
    cudnnBackendDescriptor_t descs[MAX_DESCS];
    int n_descs;
    cudnnBackendDescriptor_t ops[MAX_OPS];
    int n_ops;
    int64_t next_uid;
} graph;

/* A built plan, the graph it came from, and the scalars its variant packs point at. */
typedef struct plan {
    int used;
    uint64_t last_use;   /* the lookup that last returned it (attn_cudnn.lookups) */
    sdpa_key key;
    graph g;
    cudnnBackendDescriptor_t exec;
    int64_t workspace;
    float scale, fill, one;
} plan;

typedef struct attn_cudnn {
    gb_plugin_instance base;     /* base.device: its GPU and its stream */
    cudnnHandle_t handle;
    sdpa_env env;
    plan plans[PLAN_CACHE];
    uint64_t lookups;   /* plan lookups so far: the cache's clock */
} attn_cudnn;

/* ---- descriptors ------------------------------------------------------------------- */

/* A new descriptor of `type`, owned by `g` (released with it). */
static gb_status graph_desc(graph *g, cudnnBackendDescriptorType_t type,
                            cudnnBackendDescriptor_t *out)
{
    const gb_host *host = g->host;
    if (g->n_descs == MAX_DESCS) {
        host->set_error(host, PLUGIN ": internal: a graph needs more than %d cuDNN descriptors",
                        MAX_DESCS);
        return GB_ERR_INTERNAL;
    }
    CUDNN_CHECK(cudnnBackendCreateDescriptor(type, out));
    g->descs[g->n_descs++] = *out;
    return GB_OK;
}

static void graph_release(graph *g)
{
    while (g->n_descs > 0)
        cudnnBackendDestroyDescriptor(g->descs[--g->n_descs]);
    g->n_ops = 0;
}

static gb_status graph_add_op(graph *g, cudnnBackendDescriptor_t op)
{
    const gb_host *host = g->host;
    if (g->n_ops == MAX_OPS) {
        host->set_error(host, PLUGIN ": internal: a graph needs more than %d operations",
                        MAX_OPS);
        return GB_ERR_INTERNAL;
    }
    CUDNN_CHECK(cudnnBackendFinalize(op));
    g->ops[g->n_ops++] = op;
    return GB_OK;
}

/* Sets attribute `name` (spelt `name_text` in messages) of descriptor d: `count` values of
 * `type` at `value`. Setting an attribute runs nothing on the GPU, so there is nothing to
 * wait for under GEARBOX_CUDA_SYNC. */
static gb_status set_attribute(const graph *g, cudnnBackendDescriptor_t d,
                               const char *name_text, cudnnBackendAttributeName_t name,
                               cudnnBackendAttributeType_t type, int64_t count,
                               const void *value)
{
    const cudnnStatus_t s = cudnnBackendSetAttribute(d, name, type, count, value);
    if (s == CUDNN_STATUS_SUCCESS)
        return GB_OK;
    char detail[256] = "";
    cudnnGetLastErrorString(detail, sizeof detail);
    g->host->set_error(g->host, PLUGIN ": cudnnBackendSetAttribute(%s) failed: %s (status %d; "
                       "%s)", name_text, cudnnGetErrorString(s), (int)s, detail);
    return GB_ERR_DEVICE;
}

/* An attribute and its name, for set_attribute and its kinds below. */
#define ATTR(name) #name, name

static gb_status set_descriptor(const graph *g, cudnnBackendDescriptor_t d,
                                const char *name_text, cudnnBackendAttributeName_t name,
                                cudnnBackendDescriptor_t value)
{
    return set_attribute(g, d, name_text, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value);
}

static gb_status set_data_type(const graph *g, cudnnBackendDescriptor_t d,
                               const char *name_text, cudnnBackendAttributeName_t name,
                               cudnnDataType_t value)
{
    return set_attribute(g, d, name_text, name, CUDNN_TYPE_DATA_TYPE, 1, &value);
}

static gb_status set_int64s(const graph *g, cudnnBackendDescriptor_t d, const char *name_text,
                            cudnnBackendAttributeName_t name, int64_t count,
                            const int64_t *values)
{
    return set_attribute(g, d, name_text, name, CUDNN_TYPE_INT64, count, values);
}

static gb_status set_bool(const graph *g, cudnnBackendDescriptor_t d, const char *name_text,
                          cudnnBackendAttributeName_t name, bool value)
{
    return set_attribute(g, d, name_text, name, CUDNN_TYPE_BOOLEAN, 1, &value);
}

static gb_status set_handle(const graph *g, cudnnBackendDescriptor_t d, const char *name_text,
                            cudnnBackendAttributeName_t name)
{
    return set_attribute(g, d, name_text, name, CUDNN_TYPE_HANDLE, 1, &g->handle);
}

static gb_status finalize(const graph *g, cudnnBackendDescriptor_t d)
{
    const gb_host *host = g->host;
    CUDNN_CHECK(cudnnBackendFinalize(d));
    return GB_OK;
}

/* A tensor of `type` laid out as `l`: in memory (bound by uid in the variant pack),
 * virtual (uid 0: the next virtual id), or a host scalar passed by value. */
typedef enum tensor_kind { IN_MEMORY, VIRTUAL, BY_VALUE } tensor_kind;

static gb_status graph_tensor(graph *g, int64_t uid, cudnnDataType_t type, sdpa_layout l,
                              tensor_kind kind, cudnnBackendDescriptor_t *out)
{
    const int64_t alignment = SDPA_ALIGN_BYTES;
    gb_status st;
    if (kind == VIRTUAL)
        uid = g->next_uid++;
    if ((st = graph_desc(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR, out)) ||
        (st = set_data_type(g, *out, ATTR(CUDNN_ATTR_TENSOR_DATA_TYPE), type)) ||
        (st = set_int64s(g, *out, ATTR(CUDNN_ATTR_TENSOR_DIMENSIONS), 4, l.dims)) ||
        (st = set_int64s(g, *out, ATTR(CUDNN_ATTR_TENSOR_STRIDES), 4, l.strides)) ||
        (st = set_int64s(g, *out, ATTR(CUDNN_ATTR_TENSOR_UNIQUE_ID), 1, &uid)) ||
        (st = set_int64s(g, *out, ATTR(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT), 1, &alignment)) ||
        (st = set_bool(g, *out, ATTR(CUDNN_ATTR_TENSOR_IS_VIRTUAL), kind == VIRTUAL)))
        return st;
    if (kind == BY_VALUE &&
        (st = set_bool(g, *out, ATTR(CUDNN_ATTR_TENSOR_IS_BY_VALUE), true)) != GB_OK)
        return st;
    return finalize(g, *out);
}

/* One operand of an operation: the attribute that binds it and its descriptor (NULL: an
 * optional operand left out). */
typedef struct operand {
    const char *name_text;
    cudnnBackendAttributeName_t name;
    cudnnBackendDescriptor_t desc;
} operand;

#define OPERAND(name, desc) {#name, name, desc}

/* A new operation of `type` on its n operands, added to the graph. */
static gb_status graph_operation(graph *g, cudnnBackendDescriptorType_t type,
                                 const operand *operands, int n)
{
    cudnnBackendDescriptor_t op;
    gb_status st = graph_desc(g, type, &op);
    for (int i = 0; i < n && st == GB_OK; i++)
        if (operands[i].desc)
            st = set_descriptor(g, op, operands[i].name_text, operands[i].name,
                                operands[i].desc);
    return st != GB_OK ? st : graph_add_op(g, op);
}

/* y = mode(x[, b][, t]) elementwise, computed in `prec`; `axis` >= 0 for GEN_INDEX. */
static gb_status graph_pointwise(graph *g, cudnnPointwiseMode_t mode, cudnnDataType_t prec,
                                 int64_t axis, cudnnBackendDescriptor_t x,
                                 cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t,
                                 cudnnBackendDescriptor_t y)
{
    cudnnBackendDescriptor_t pw;
    gb_status st;
    if ((st = graph_desc(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &pw)) ||
        (st = set_attribute(g, pw, ATTR(CUDNN_ATTR_POINTWISE_MODE), CUDNN_TYPE_POINTWISE_MODE,
                            1, &mode)) ||
        (st = set_data_type(g, pw, ATTR(CUDNN_ATTR_POINTWISE_MATH_PREC), prec)) ||
        (axis >= 0 && (st = set_int64s(g, pw, ATTR(CUDNN_ATTR_POINTWISE_AXIS), 1, &axis))) ||
        (st = finalize(g, pw)))
        return st;
    const operand operands[] = {
        OPERAND(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw),
        OPERAND(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x),
        OPERAND(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b),
        OPERAND(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t),
        OPERAND(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y),
    };
    return graph_operation(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, operands, 5);
}

/* The common case: a new virtual f32 y of layout `l` = mode(x, b) in f32. */
static gb_status graph_binary(graph *g, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                              cudnnBackendDescriptor_t b, sdpa_layout l,
                              cudnnBackendDescriptor_t *y)
{
    gb_status st = graph_tensor(g, 0, CUDNN_DATA_FLOAT, l, VIRTUAL, y);
    return st != GB_OK ? st : graph_pointwise(g, mode, CUDNN_DATA_FLOAT, -1, x, b, NULL, *y);
}

/* c = a b per (batch, head), accumulated in f32. */
static gb_status graph_matmul(graph *g, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
                              cudnnBackendDescriptor_t c)
{
    cudnnBackendDescriptor_t mm;
    gb_status st;
    if ((st = graph_desc(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR, &mm)) ||
        (st = set_data_type(g, mm, ATTR(CUDNN_ATTR_MATMUL_COMP_TYPE), CUDNN_DATA_FLOAT)) ||
        (st = finalize(g, mm)))
        return st;
    const operand operands[] = {
        OPERAND(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a),
        OPERAND(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b),
        OPERAND(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c),
        OPERAND(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm),
    };
    return graph_operation(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, operands, 4);
}

/* y = reduce `how` of x over the dims where y has extent 1, in f32. */
static gb_status graph_reduce(graph *g, cudnnReduceTensorOp_t how, cudnnBackendDescriptor_t x,
                              cudnnBackendDescriptor_t y)
{
    cudnnBackendDescriptor_t red;
    gb_status st;
    if ((st = graph_desc(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, &red)) ||
        (st = set_attribute(g, red, ATTR(CUDNN_ATTR_REDUCTION_OPERATOR),
                            CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how)) ||
        (st = set_data_type(g, red, ATTR(CUDNN_ATTR_REDUCTION_COMP_TYPE), CUDNN_DATA_FLOAT)) ||
        (st = finalize(g, red)))
        return st;
    const operand operands[] = {
        OPERAND(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x),
        OPERAND(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y),
        OPERAND(CUDNN_ATTR_OPERATION_REDUCTION_DESC, red),
    };
    return graph_operation(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, operands, 3);
}

/* y = x seen through another layout (a transpose: same elements, swapped dims). */
static gb_status graph_reshape(graph *g, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y)
{
    const operand operands[] = {
        OPERAND(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x),
        OPERAND(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y),
    };
    return graph_operation(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, operands, 2);
}

/* ---- the attention graphs ------------------------------------------------------------ */

/* The layout of view `i` of the key (its strides with the problem's dims). */
static sdpa_layout key_view(const sdpa_key *k, int i)
{
    sdpa_layout l = {{k->batch, k->heads, k->seq_len, k->head_dim}, {0, 0, 0, 0}};
    memcpy(l.strides, k->strides[i], sizeof l.strides);
    return l;
}

/* The softmax scale, a scalar every graph reads by value. */
static gb_status graph_scale(graph *g, cudnnBackendDescriptor_t *scale)
{
    return graph_tensor(g, UID_SCALE, CUDNN_DATA_FLOAT, sdpa_scalar(), BY_VALUE, scale);
}

/* *s = Q K^T * scale, (B, H, T, T) virtual f32: what forward and backward start from. */
static gb_status graph_scores(graph *g, const gb_attn_problem *p, cudnnBackendDescriptor_t q,
                              cudnnBackendDescriptor_t kt, cudnnBackendDescriptor_t scale,
                              cudnnBackendDescriptor_t *s)
{
    const sdpa_layout l = sdpa_scores(p);
    cudnnBackendDescriptor_t qk;
    gb_status st = graph_tensor(g, 0, CUDNN_DATA_FLOAT, l, VIRTUAL, &qk);
    if (st == GB_OK)
        st = graph_matmul(g, q, kt, qk);
    return st != GB_OK ? st : graph_binary(g, CUDNN_POINTWISE_MUL, qk, scale, l, s);
}

/* *masked = x with the fill value where the key lies after the query (causal problems;
 * x itself otherwise): generated row and column indices compared, then a select, as the
 * cuDNN frontend's causal mask is built. */
static gb_status graph_causal(graph *g, const gb_attn_problem *p, cudnnBackendDescriptor_t x,
                              cudnnBackendDescriptor_t *masked)
{
    const sdpa_layout l = sdpa_scores(p);
    cudnnBackendDescriptor_t row, col, keep, fill;
    gb_status st;
    *masked = x;
    if (!p->causal)
        return GB_OK;
    if ((st = graph_tensor(g, 0, CUDNN_DATA_INT32, l, VIRTUAL, &row)) ||
        (st = graph_pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, 2, x, NULL, NULL,
                              row)) ||
        (st = graph_tensor(g, 0, CUDNN_DATA_INT32, l, VIRTUAL, &col)) ||
        (st = graph_pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, 3, x, NULL, NULL,
                              col)) ||
        (st = graph_tensor(g, 0, CUDNN_DATA_BOOLEAN, l, VIRTUAL, &keep)) ||
        (st = graph_pointwise(g, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, -1, row, col, NULL,
                              keep)) ||
        (st = graph_tensor(g, UID_FILL, CUDNN_DATA_FLOAT, sdpa_scalar(), BY_VALUE, &fill)) ||
        (st = graph_tensor(g, 0, CUDNN_DATA_FLOAT, l, VIRTUAL, masked)))
        return st;
    return graph_pointwise(g, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, -1, x, fill,
                           keep, *masked);
}

/* Forward: softmax(S) with its statistics, then O = P V. */
static gb_status graph_forward(graph *g, const sdpa_key *k, const gb_attn_problem *p)
{
    const sdpa_layout rows = sdpa_row_stats(p), l = sdpa_scores(p);
    cudnnBackendDescriptor_t q, kt, v, o, stats, scale, scaled, s, max, shifted, e, sum, log_sum,
        probs;
    gb_status st;
    if ((st = graph_tensor(g, UID_Q, g->io, key_view(k, SDPA_Q), IN_MEMORY, &q)) ||
        (st = graph_tensor(g, UID_K, g->io, sdpa_transposed(key_view(k, SDPA_K)), IN_MEMORY,
                           &kt)) ||
        (st = graph_tensor(g, UID_V, g->io, key_view(k, SDPA_V), IN_MEMORY, &v)) ||
        (st = graph_tensor(g, UID_O, g->io, key_view(k, SDPA_O), IN_MEMORY, &o)) ||
        (st = graph_tensor(g, UID_STATS, CUDNN_DATA_FLOAT, rows, IN_MEMORY, &stats)) ||
        (st = graph_scale(g, &scale)) || (st = graph_scores(g, p, q, kt, scale, &scaled)) ||
        (st = graph_causal(g, p, scaled, &s)))
        return st;
    if ((st = graph_tensor(g, 0, CUDNN_DATA_FLOAT, rows, VIRTUAL, &max)) ||
        (st = graph_reduce(g, CUDNN_REDUCE_TENSOR_MAX, s, max)) ||
        (st = graph_binary(g, CUDNN_POINTWISE_SUB, s, max, l, &shifted)) ||
        (st = graph_tensor(g, 0, CUDNN_DATA_FLOAT, l, VIRTUAL, &e)) ||
        (st = graph_pointwise(g, CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, -1, shifted, NULL, NULL,
                              e)) ||
        (st = graph_tensor(g, 0, CUDNN_DATA_FLOAT, rows, VIRTUAL, &sum)) ||
        (st = graph_reduce(g, CUDNN_REDUCE_TENSOR_ADD, e, sum)) ||
        (st = graph_tensor(g, 0, CUDNN_DATA_FLOAT, rows, VIRTUAL, &log_sum)) ||
        (st = graph_pointwise(g, CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, -1, sum, NULL, NULL,
                              log_sum)) ||
        (st = graph_pointwise(g, CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, -1, max, log_sum, NULL,
                              stats)))
        return st;
    // P goes into the second product in the io dtype, as cuDNN's fused engines expect
    if ((st = graph_tensor(g, 0, g->io, l, VIRTUAL, &probs)) ||
        (st = graph_pointwise(g, CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, -1, e, sum, NULL,
                              probs)))
        return st;
    return graph_matmul(g, probs, v, o);
}

/* Backward: the flash-attention backward on the saved log-sum-exps (see the top). */
static gb_status graph_backward(graph *g, const sdpa_key *k, const gb_attn_problem *p)
{
    const sdpa_layout rows = sdpa_row_stats(p), l = sdpa_scores(p);
    const sdpa_layout head = sdpa_packed(p->batch, p->heads, p->seq_len, p->head_dim);
    cudnnBackendDescriptor_t q, kt, vt, o, dout, dq, dk, dv, stats, rowsum, one, scale, s,
        shifted, masked, probs, probs_t, dp, centred, ds_unscaled, ds, ds_t, k_rows, dout_o, dot;
    gb_status st;
    if ((st = graph_tensor(g, UID_Q, g->io, key_view(k, SDPA_Q), IN_MEMORY, &q)) ||
        (st = graph_tensor(g, UID_K, g->io, sdpa_transposed(key_view(k, SDPA_K)), IN_MEMORY,
                           &kt)) ||
        (st = graph_tensor(g, UID_V, g->io, sdpa_transposed(key_view(k, SDPA_V)), IN_MEMORY,
                           &vt)) ||
        (st = graph_tensor(g, UID_O, g->io, key_view(k, SDPA_O), IN_MEMORY, &o)) ||
        (st = graph_tensor(g, UID_DO, g->io, key_view(k, SDPA_DO), IN_MEMORY, &dout)) ||
        (st = graph_tensor(g, UID_DQ, g->io, key_view(k, SDPA_DQ), IN_MEMORY, &dq)) ||
        (st = graph_tensor(g, UID_DK, g->io, key_view(k, SDPA_DK), IN_MEMORY, &dk)) ||
        (st = graph_tensor(g, UID_DV, g->io, key_view(k, SDPA_DV), IN_MEMORY, &dv)) ||
        (st = graph_tensor(g, UID_STATS, CUDNN_DATA_FLOAT, rows, IN_MEMORY, &stats)) ||
        (st = graph_tensor(g, UID_ROWSUM, CUDNN_DATA_FLOAT, rows, IN_MEMORY, &rowsum)) ||
        (st = graph_tensor(g, UID_ONE, CUDNN_DATA_FLOAT, sdpa_scalar(), BY_VALUE, &one)) ||
        (st = graph_scale(g, &scale)))
        return st;
    // rowsum(dO * O), times one where dropout would put its scale, as the frontend does
    if ((st = graph_binary(g, CUDNN_POINTWISE_MUL, dout, o, head, &dout_o)) ||
        (st = graph_tensor(g, 0, CUDNN_DATA_FLOAT, rows, VIRTUAL, &dot)) ||
        (st = graph_reduce(g, CUDNN_REDUCE_TENSOR_ADD, dout_o, dot)) ||
        (st = graph_pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, -1, dot, one, NULL,
                              rowsum)))
        return st;
    // P = exp(S - LSE), masked after the subtraction as the frontend orders it; dV = P^T dO
    if ((st = graph_scores(g, p, q, kt, scale, &s)) ||
        (st = graph_binary(g, CUDNN_POINTWISE_SUB, s, stats, l, &shifted)) ||
        (st = graph_causal(g, p, shifted, &masked)) ||
        (st = graph_tensor(g, 0, CUDNN_DATA_FLOAT, l, VIRTUAL, &probs)) ||
        (st = graph_pointwise(g, CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, -1, masked, NULL, NULL,
                              probs)) ||
        (st = graph_tensor(g, 0, g->io, sdpa_transposed(l), VIRTUAL, &probs_t)) ||
        (st = graph_reshape(g, probs, probs_t)) || (st = graph_matmul(g, probs_t, dout, dv)))
        return st;
    // dS = P * (dO V^T - rowsum) * scale, and dK = dS^T Q
    if ((st = graph_tensor(g, 0, CUDNN_DATA_FLOAT, l, VIRTUAL, &dp)) ||
        (st = graph_matmul(g, dout, vt, dp)) ||
        (st = graph_binary(g, CUDNN_POINTWISE_SUB, dp, rowsum, l, &centred)) ||
        (st = graph_binary(g, CUDNN_POINTWISE_MUL, centred, probs, l, &ds_unscaled)) ||
        (st = graph_binary(g, CUDNN_POINTWISE_MUL, ds_unscaled, scale, l, &ds)) ||
        (st = graph_tensor(g, 0, g->io, sdpa_transposed(l), VIRTUAL, &ds_t)) ||
        (st = graph_reshape(g, ds, ds_t)) || (st = graph_matmul(g, ds_t, q, dk)))
        return st;
    // dQ = dS K, with K read back in rows from the K^T tensor
    if ((st = graph_tensor(g, 0, g->io, key_view(k, SDPA_K), VIRTUAL, &k_rows)) ||
        (st = graph_reshape(g, kt, k_rows)))
        return st;
    return graph_matmul(g, ds, k_rows, dq);
}

/* ---- plans --------------------------------------------------------------------------- */

static const char *direction_name(int direction)
{
    return direction == SDPA_FORWARD ? "forward" : "backward";
}

/* "forward graph of (B, H, T, D) = (2, 12, 1024, 64) bf16 causal", for messages. */
static const char *key_text(const sdpa_key *k, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s graph of (B, H, T, D) = (%lld, %lld, %lld, %lld) %s%s",
             direction_name(k->direction), (long long)k->batch, (long long)k->heads,
             (long long)k->seq_len, (long long)k->head_dim, gb_dtype_name((gb_dtype)k->dtype),
             k->causal ? " causal" : "");
    return buf;
}

/* One engine configuration the heuristics offered, and what its engine says of itself. */
typedef struct candidate {
    cudnnBackendDescriptor_t cfg;
    const char *mode;   /* the heuristics mode that offered it */
    int determinism;    /* SDPA_DETERMINISTIC, SDPA_NONDETERMINISTIC or SDPA_NOTES_UNKNOWN */
    int64_t engine;     /* cuDNN's global engine index; -1 when cuDNN does not say */
} candidate;

/* Reads the engine behind c->cfg: its global index and whether its numerical notes call
 * it nondeterministic (SDPA_NOTES_UNKNOWN when cuDNN cannot report them). */
static gb_status describe_engine(graph *g, candidate *c)
{
    cudnnBackendDescriptor_t engine;
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    int64_t n = 0, got = 0;
    c->engine = -1;
    c->determinism = SDPA_NOTES_UNKNOWN;
    gb_status st = graph_desc(g, CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine);
    if (st != GB_OK)
        return st;
    if (cudnnBackendGetAttribute(c->cfg, CUDNN_ATTR_ENGINECFG_ENGINE,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got, &engine) !=
        CUDNN_STATUS_SUCCESS)
        return GB_OK;
    if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1,
                                 &got, &c->engine) != CUDNN_STATUS_SUCCESS)
        c->engine = -1;
    if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                 CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n,
                                 notes) != CUDNN_STATUS_SUCCESS)
        return GB_OK;
    c->determinism = SDPA_DETERMINISTIC;
    for (int64_t i = 0; i < n && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; i++)
        if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC)
            c->determinism = SDPA_NONDETERMINISTIC;
    return GB_OK;
}

/* What the search for an engine saw, for the log line and the message when it finds none. */
typedef struct search {
    int64_t configs, deterministic, nondeterministic, unknown;
    cudnnStatus_t last;
    char detail[256];
} search;

/* The configurations heuristics mode `mode` offers for `op_graph`, into cfgs (*n of them);
 * a mode that offers none, or refuses the graph, leaves *n at 0 and says why in *seen. */
static gb_status heuristics(graph *g, cudnnBackendDescriptor_t op_graph,
                            cudnnBackendHeurMode_t mode, search *seen,
                            cudnnBackendDescriptor_t *cfgs, int64_t *n)
{
    cudnnBackendDescriptor_t heur;
    gb_status st;
    *n = 0;
    if ((st = graph_desc(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur)) != GB_OK)
        return st;
    for (int i = 0; i < MAX_CONFIGS; i++)
        if ((st = graph_desc(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[i])) != GB_OK)
            return st;
    cudnnStatus_t s = cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op_graph);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1,
                                     &mode);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(heur);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, MAX_CONFIGS, n, cfgs);
    if (s != CUDNN_STATUS_SUCCESS) {
        *n = 0;
        seen->last = s;
        cudnnGetLastErrorString(seen->detail, sizeof seen->detail);
    }
    *n = *n < MAX_CONFIGS ? *n : MAX_CONFIGS;
    return GB_OK;
}

/* Every configuration of heuristics mode A, then of the fallback list, described, into
 * cands (*n of them); *seen counts them by what their notes say. */
static gb_status candidates(graph *g, cudnnBackendDescriptor_t op_graph, search *seen,
                            candidate *cands, int *n)
{
    static const cudnnBackendHeurMode_t modes[] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    static const char *const mode_names[] = {"heuristics mode A", "the fallback list"};
    *n = 0;
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        cudnnBackendDescriptor_t cfgs[MAX_CONFIGS];
        int64_t offered = 0;
        gb_status st = heuristics(g, op_graph, modes[m], seen, cfgs, &offered);
        for (int64_t i = 0; i < offered && st == GB_OK; i++) {
            candidate *c = &cands[(*n)++];
            c->cfg = cfgs[i];
            c->mode = mode_names[m];
            st = describe_engine(g, c);
            seen->configs++;
            seen->deterministic += c->determinism == SDPA_DETERMINISTIC;
            seen->nondeterministic += c->determinism == SDPA_NONDETERMINISTIC;
            seen->unknown += c->determinism == SDPA_NOTES_UNKNOWN;
        }
        if (st != GB_OK)
            return st;
    }
    return GB_OK;
}

/* An execution plan of configuration `c` into *exec, or *exec NULL when the configuration
 * does not take this graph (cuDNN's reason then in *seen). */
static gb_status plan_of(graph *g, const candidate *c, search *seen,
                         cudnnBackendDescriptor_t *exec)
{
    cudnnBackendDescriptor_t plan;
    gb_status st = graph_desc(g, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan);
    *exec = NULL;
    if (st != GB_OK)
        return st;
    if ((st = set_handle(g, plan, ATTR(CUDNN_ATTR_EXECUTION_PLAN_HANDLE))) ||
        (st = set_descriptor(g, plan, ATTR(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG), c->cfg)))
        return st;
    seen->last = cudnnBackendFinalize(plan);
    if (seen->last == CUDNN_STATUS_SUCCESS)
        *exec = plan;
    else
        cudnnGetLastErrorString(seen->detail, sizeof seen->detail);
    return GB_OK;
}

/* The log line of the engine a plan runs on, and why that one. An engine whose notes
 * cuDNN could not report is kept only after every deterministic one failed, and said
 * louder: the plugin promises the same bits run after run, which it then cannot check. */
static void log_choice(const graph *g, const sdpa_key *k, const candidate *c,
                       const search *seen)
{
    char what[160];
    key_text(k, what, sizeof what);
    if (c->determinism == SDPA_DETERMINISTIC)
        g->host->log(g->host, GB_LOG_DEBUG, "%s: cuDNN engine %lld from %s, deterministic by "
                     "its numerical notes (%lld configurations offered)", what,
                     (long long)c->engine, c->mode, (long long)seen->configs);
    else
        g->host->log(g->host, GB_LOG_WARN, "%s: cuDNN engine %lld from %s, whose numerical "
                     "notes cuDNN does not report: taken because none of the %lld engines "
                     "known to be deterministic built a plan (%lld nondeterministic ones left "
                     "out); its results may differ in the last bits from run to run",
                     what, (long long)c->engine, c->mode, (long long)seen->deterministic,
                     (long long)seen->nondeterministic);
}

/* The operation graph of g's operations, and an execution plan for it with its workspace
 * size: the first configuration in sdpa_engine_order's order whose plan finalizes. */
static gb_status graph_plan(graph *g, const sdpa_key *k, cudnnBackendDescriptor_t *exec,
                            int64_t *workspace)
{
    const gb_host *host = g->host;
    cudnnBackendDescriptor_t op_graph;
    search seen = {0, 0, 0, 0, CUDNN_STATUS_SUCCESS, ""};
    char what[160];
    gb_status st = graph_desc(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &op_graph);
    if (st != GB_OK)
        return st;
    if ((st = set_attribute(g, op_graph, ATTR(CUDNN_ATTR_OPERATIONGRAPH_OPS),
                            CUDNN_TYPE_BACKEND_DESCRIPTOR, g->n_ops, g->ops)) ||
        (st = set_handle(g, op_graph, ATTR(CUDNN_ATTR_OPERATIONGRAPH_HANDLE))))
        return st;
    cudnnStatus_t fin = cudnnBackendFinalize(op_graph);
    if (fin != CUDNN_STATUS_SUCCESS) {
        cudnnGetLastErrorString(seen.detail, sizeof seen.detail);
        host->set_error(host, PLUGIN ": cuDNN refused the %s: cudnnBackendFinalize(operation "
                        "graph) failed: %s (%s)", key_text(k, what, sizeof what),
                        cudnnGetErrorString(fin), seen.detail);
        return GB_ERR_UNSUPPORTED;
    }
    candidate cands[2 * MAX_CONFIGS];
    int determinism[2 * MAX_CONFIGS], order[2 * MAX_CONFIGS], n = 0;
    if ((st = candidates(g, op_graph, &seen, cands, &n)) != GB_OK)
        return st;
    for (int i = 0; i < n; i++)
        determinism[i] = cands[i].determinism;
    const int tries = sdpa_engine_order(determinism, n, order);
    *exec = NULL;
    for (int t = 0; t < tries && !*exec; t++) {
        if ((st = plan_of(g, &cands[order[t]], &seen, exec)) != GB_OK)
            return st;
        if (*exec)
            log_choice(g, k, &cands[order[t]], &seen);
    }
    if (!*exec) {
        host->set_error(host, PLUGIN ": cuDNN has no engine for the %s: its heuristics offered "
                        "%lld configurations (%lld deterministic, %lld of unknown determinism, "
                        "%lld nondeterministic and left out), and none built a plan (last: %s; "
                        "%s); use attn/flash or attn/mem_efficient",
                        key_text(k, what, sizeof what), (long long)seen.configs,
                        (long long)seen.deterministic, (long long)seen.unknown,
                        (long long)seen.nondeterministic, cudnnGetErrorString(seen.last),
                        seen.detail);
        return GB_ERR_UNSUPPORTED;
    }
    CUDNN_CHECK(cudnnBackendGetAttribute(*exec, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                         CUDNN_TYPE_INT64, 1, &(int64_t){0}, workspace));
    return GB_OK;
}

/* The problem a key was made from. */
static gb_attn_problem key_problem(const sdpa_key *k)
{
    gb_attn_problem p = {.struct_size = sizeof p, .batch = k->batch, .heads = k->heads,
                         .seq_len = k->seq_len, .head_dim = k->head_dim,
                         .dtype = (gb_dtype)k->dtype, .causal = k->causal};
    return p;
}

static void plan_release(plan *pl)
{
    if (pl->used)
        graph_release(&pl->g);
    pl->used = 0;
}

/* Builds the graph and plan of `k` into the slot `pl`. */
static gb_status plan_build(attn_cudnn *a, const sdpa_key *k, plan *pl)
{
    const gb_attn_problem p = key_problem(k);
    plan_release(pl);
    memset(pl, 0, sizeof *pl);
    pl->g.host = a->base.host;
    pl->g.handle = a->handle;
    pl->g.io = k->dtype == GB_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
    pl->g.next_uid = UID_VIRTUAL;
    pl->used = 1;
    gb_status st = k->direction == SDPA_FORWARD ? graph_forward(&pl->g, k, &p)
                                                : graph_backward(&pl->g, k, &p);
    if (st == GB_OK)
        st = graph_plan(&pl->g, k, &pl->exec, &pl->workspace);
    if (st != GB_OK) {
        plan_release(pl);
        return st;
    }
    memcpy(&pl->key, k, sizeof pl->key);   // padding too: keys compare with memcmp
    pl->scale = sdpa_scale(&p);
    pl->fill = sdpa_mask_fill(a->env.cudnn_version);
    pl->one = 1.0f;
    return GB_OK;
}

/* The cached plan of `k`, built now if it is not there yet, into the slot of the plan
 * used longest ago: never one of the last PLAN_CACHE - 1 lookups', so the plans a caller
 * fetched just before (forward and backward, memory()'s four) stay where they are. */
static gb_status plan_for(attn_cudnn *a, const sdpa_key *k, plan **out)
{
    const uint64_t now = ++a->lookups;
    uint64_t last_use[PLAN_CACHE];
    for (int i = 0; i < PLAN_CACHE; i++) {
        if (a->plans[i].used && memcmp(&a->plans[i].key, k, sizeof *k) == 0) {
            a->plans[i].last_use = now;
            *out = &a->plans[i];
            return GB_OK;
        }
        last_use[i] = a->plans[i].used ? a->plans[i].last_use : 0;
    }
    plan *slot = &a->plans[sdpa_victim_slot(last_use, PLAN_CACHE)];
    gb_status st = plan_build(a, k, slot);
    if (st == GB_OK)
        slot->last_use = now;
    *out = st == GB_OK ? slot : NULL;
    return st;
}

/* The workspace memory() declares for `p`: enough for the plans of the core's layout and
 * of contiguous views, forward and backward (building them if they are not cached). */
static gb_status planned_workspace(attn_cudnn *a, const gb_attn_problem *p, int64_t *bytes)
{
    *bytes = 0;
    for (int core = 0; core < 2; core++) {
        const sdpa_key fk = sdpa_planned_key(SDPA_FORWARD, p, core);
        const sdpa_key bk = sdpa_planned_key(SDPA_BACKWARD, p, core);
        plan *fwd, *bwd;
        gb_status st = plan_for(a, &fk, &fwd);
        if (st == GB_OK)
            st = plan_for(a, &bk, &bwd);
        if (st != GB_OK)
            return st;
        const int64_t need = sdpa_workspace_bytes(p, fwd->workspace, bwd->workspace);
        *bytes = need > *bytes ? need : *bytes;
    }
    return GB_OK;
}

/* ---- the plugin ---------------------------------------------------------------------- */

static int cudnn_eligible(void *self, const gb_attn_problem *p, char *reason, size_t cap)
{
    const attn_cudnn *a = (const attn_cudnn *)self;
    return sdpa_eligible(&a->env, p, reason, cap);
}

/* The compute capability of the device's GPU: from the context (device ABI 1.2), else
 * asked of CUDA. */
static gb_status device_capability(const gb_host *host, const gb_device_ctx *device,
                                   sdpa_env *env)
{
    if (device->struct_size >= offsetof(gb_device_ctx, cc_minor) + sizeof device->cc_minor &&
        device->cc_major > 0) {
        env->cc_major = device->cc_major;
        env->cc_minor = device->cc_minor;
        return GB_OK;
    }
    int major = 0, minor = 0;
    GB_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                                         device->ordinal));
    GB_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor,
                                         device->ordinal));
    env->cc_major = major;
    env->cc_minor = minor;
    return GB_OK;
}

/* The cuDNN handle on the device's GPU and compute stream. */
static gb_status open_handle(attn_cudnn *a)
{
    const gb_host *host = a->base.host;
    GB_CUDA_CHECK(cudaSetDevice(a->base.device.ordinal));
    CUDNN_CHECK(cudnnCreate(&a->handle));
    CUDNN_CHECK(cudnnSetStream(a->handle, (cudaStream_t)a->base.device.stream));
    return GB_OK;
}

static void cudnn_destroy(void *self)
{
    attn_cudnn *a = (attn_cudnn *)self;
    if (!a)
        return;
    for (int i = 0; i < PLAN_CACHE; i++)
        plan_release(&a->plans[i]);
    if (a->handle)
        cudnnDestroy(a->handle);
    gb_plugin_instance_destroy(a);
}

static gb_status cudnn_create(const gb_host *host, const gb_value *options,
                              const gb_device_ctx *device, void **self)
{
    (void)options;
    gb_status st = gb_attn_cuda_instance_new(host, device, PLUGIN, sizeof(attn_cudnn), self);
    if (st != GB_OK)
        return st;
    attn_cudnn *a = (attn_cudnn *)*self;
    a->env.cudnn_version = (int64_t)cudnnGetVersion();
    if ((st = device_capability(host, &a->base.device, &a->env)) != GB_OK ||
        (st = open_handle(a)) != GB_OK) {
        cudnn_destroy(a);
        *self = NULL;
    }
    return st;
}

static gb_status cudnn_memory(void *self, const gb_attn_problem *p, size_t *saved_bytes,
                              size_t *workspace_bytes)
{
    attn_cudnn *a = (attn_cudnn *)self;
    char reason[256];
    if (!sdpa_eligible(&a->env, p, reason, sizeof reason)) {
        a->base.host->set_error(a->base.host, "memory: %s", reason);
        return GB_ERR_UNSUPPORTED;
    }
    int64_t workspace = 0;
    gb_status st = planned_workspace(a, p, &workspace);
    if (st != GB_OK)
        return st;
    *saved_bytes = (size_t)(p->batch * p->heads * p->seq_len) * sizeof(float);
    *workspace_bytes = (size_t)workspace;
    return GB_OK;
}

/* The checks every call makes: eligibility and view shapes (attn_checks.h), then the
 * 16-byte alignment cuDNN needs of every view and of saved and the workspace. */
static gb_status check_call(const attn_cudnn *a, const char *call, const gb_attn_problem *p,
                            const char *const *names, const gb_tensor *const *views, int n,
                            const void *saved, const void *workspace)
{
    const gb_host *host = a->base.host;
    char reason[256];
    int ok = sdpa_eligible(&a->env, p, reason, sizeof reason);
    gb_status st = gb_attn_check_call(host, PLUGIN, call, ok, reason, p, names, views, n);
    for (int i = 0; i < n && st == GB_OK; i++)
        if (!sdpa_view_aligned(views[i], names[i], reason, sizeof reason)) {
            host->set_error(host, "%s: %s", call, reason);
            st = GB_ERR_UNSUPPORTED;
        }
    if (st == GB_OK && (!sdpa_buffer_aligned(saved, "saved", reason, sizeof reason) ||
                        !sdpa_buffer_aligned(workspace, "workspace", reason, sizeof reason))) {
        host->set_error(host, "%s: %s", call, reason);
        st = GB_ERR_UNSUPPORTED;
    }
    return st;
}

/* The plan for a call on `views` (in sdpa_key's order), checked against the workspace
 * memory() declares for the problem. */
static gb_status call_plan(attn_cudnn *a, int direction, const gb_attn_problem *p,
                           const gb_tensor *const *views, plan **out)
{
    int64_t strides[SDPA_VIEWS][4], declared = 0;
    for (int i = 0; i < sdpa_views_of(direction); i++)
        memcpy(strides[i], views[i]->stride, sizeof strides[i]);
    const sdpa_key k = sdpa_make_key(direction, p, (const int64_t(*)[4])strides);
    gb_status st = planned_workspace(a, p, &declared);
    if (st == GB_OK)
        st = plan_for(a, &k, out);
    if (st != GB_OK)
        return st;
    const int64_t need = direction == SDPA_FORWARD ? (*out)->workspace
                                                   : sdpa_workspace_bytes(p, 0, (*out)->workspace);
    if (need > declared) {
        const gb_host *host = a->base.host;
        host->set_error(host, "%s: the views' strides need a cuDNN plan with %lld bytes of "
                        "workspace, more than the %lld memory() declared for this problem",
                        direction_name(direction), (long long)need, (long long)declared);
        return GB_ERR_UNSUPPORTED;
    }
    return GB_OK;
}

/* Runs plan `pl` with the tensors `uids` at `ptrs` and the workspace. */
static gb_status plan_execute(const attn_cudnn *a, plan *pl, const int64_t *uids, void **ptrs,
                              int n, void *workspace)
{
    const gb_host *host = a->base.host;
    cudnnBackendDescriptor_t pack;
    CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack));
    cudnnStatus_t s = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
                                               CUDNN_TYPE_INT64, n, uids);
    const char *failed = "cudnnBackendSetAttribute(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS)";
    if (s == CUDNN_STATUS_SUCCESS) {
        s = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                     CUDNN_TYPE_VOID_PTR, n, ptrs);
        failed = "cudnnBackendSetAttribute(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS)";
    }
    if (s == CUDNN_STATUS_SUCCESS) {
        s = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
                                     CUDNN_TYPE_VOID_PTR, 1, &workspace);
        failed = "cudnnBackendSetAttribute(CUDNN_ATTR_VARIANT_PACK_WORKSPACE)";
    }
    if (s == CUDNN_STATUS_SUCCESS) {
        s = cudnnBackendFinalize(pack);
        failed = "cudnnBackendFinalize(variant pack)";
    }
    if (s == CUDNN_STATUS_SUCCESS) {
        s = cudnnBackendExecute(a->handle, pl->exec, pack);
        failed = "cudnnBackendExecute";
    }
    cudnnBackendDestroyDescriptor(pack);
    if (s != CUDNN_STATUS_SUCCESS) {
        char detail[256] = "";
        cudnnGetLastErrorString(detail, sizeof detail);
        host->set_error(host, PLUGIN ": %s of the %s plan for (B, H, T, D) = (%lld, %lld, "
                        "%lld, %lld) failed: %s (%s)", failed,
                        direction_name(pl->key.direction), (long long)pl->key.batch,
                        (long long)pl->key.heads, (long long)pl->key.seq_len,
                        (long long)pl->key.head_dim, cudnnGetErrorString(s), detail);
        return GB_ERR_DEVICE;
    }
    const cudaError_t ran = gb_cuda_sync_check();
    if (ran != cudaSuccess) {
        char what[160];
        host->set_error(host, PLUGIN ": running the plan of the %s (GEARBOX_CUDA_SYNC=1 waited "
                        "for it) failed: %s (%s)", key_text(&pl->key, what, sizeof what),
                        cudaGetErrorString(ran), cudaGetErrorName(ran));
        return GB_ERR_DEVICE;
    }
    return GB_OK;
}

static gb_status cudnn_forward(void *self, const gb_attn_problem *p, gb_tensor out,
                               gb_tensor q, gb_tensor k, gb_tensor v, void *saved,
                               void *workspace)
{
    attn_cudnn *a = (attn_cudnn *)self;
    // in sdpa_key's view order
    const char *names[] = {"q", "k", "v", "out"};
    const gb_tensor *views[] = {&q, &k, &v, &out};
    plan *pl;
    gb_status st = check_call(a, "forward", p, names, views, 4, saved, workspace);
    if (st != GB_OK || (st = call_plan(a, SDPA_FORWARD, p, views, &pl)) != GB_OK)
        return st;
    const int64_t uids[] = {UID_Q, UID_K, UID_V, UID_O, UID_STATS, UID_SCALE, UID_FILL};
    void *ptrs[] = {q.data, k.data, v.data, out.data, saved, &pl->scale, &pl->fill};
    return plan_execute(a, pl, uids, ptrs, p->causal ? 7 : 6, workspace);
}

static gb_status cudnn_backward(void *self, const gb_attn_problem *p, gb_tensor dq,
                                gb_tensor dk, gb_tensor dv, gb_tensor dout, gb_tensor q,
                                gb_tensor k, gb_tensor v, gb_tensor out, const void *saved,
                                void *workspace)
{
    attn_cudnn *a = (attn_cudnn *)self;
    const char *names[] = {"q", "k", "v", "out", "dout", "dq", "dk", "dv"};
    const gb_tensor *views[] = {&q, &k, &v, &out, &dout, &dq, &dk, &dv};
    plan *pl;
    gb_status st = check_call(a, "backward", p, names, views, SDPA_VIEWS, saved,
                              workspace);
    if (st != GB_OK || (st = call_plan(a, SDPA_BACKWARD, p, views, &pl)) != GB_OK)
        return st;
    void *rowsum = (char *)workspace + sdpa_rowsum_offset(pl->workspace);
    const int64_t uids[] = {UID_Q, UID_K, UID_V, UID_O, UID_DO, UID_DQ, UID_DK,
                            UID_DV, UID_STATS, UID_ROWSUM, UID_SCALE, UID_ONE, UID_FILL};
    void *ptrs[] = {q.data, k.data, v.data, out.data, dout.data, dq.data, dk.data,
                    dv.data, (void *)saved, rowsum, &pl->scale, &pl->one, &pl->fill};
    return plan_execute(a, pl, uids, ptrs, p->causal ? 13 : 12, workspace);
}

GB_ATTN_PLUGIN("cudnn", "1.0.0", "cuDNN 9 fused flash attention (backend graph API); bf16, f16",
               GB_DEVICE_CUDA, GB_DTYPE_BIT(GB_BF16) | GB_DTYPE_BIT(GB_F16),
               GB_CAP_DETERMINISTIC | GB_CAP_QUEUED_MEMORY, GB_NO_OPTIONS, .create = cudnn_create,
               .destroy = cudnn_destroy, .eligible = cudnn_eligible, .memory = cudnn_memory,
               .forward = cudnn_forward, .backward = cudnn_backward)
