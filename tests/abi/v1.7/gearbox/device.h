/* gearbox device plugins: memory and the base kernels of a GPT.
 *
 * A device plugin owns one accelerator (or the CPU): it allocates and copies memory,
 * describes itself, and runs the model's elementary kernels on memory it allocated. The
 * core plans every buffer before the first step, so alloc() is never called from the
 * training loop, and kernels never allocate either.
 *
 * Calling convention for kernels
 * - Every pointer is a device pointer obtained from alloc() (on the CPU device, host
 *   memory). Shapes are given in elements, row-major, innermost dimension last; the shape
 *   of each tensor is in the comment beside it, e.g. `out (N, C)`.
 * - `dtype` names the element type of the activation tensors of that call (marked "act");
 *   parameters, their gradients and per-row statistics are f32. A kernel that does not
 *   support a dtype returns GB_ERR_UNSUPPORTED and says so through host->set_error().
 * - Parameter-gradient outputs marked "+=" accumulate (for gradient accumulation); the
 *   core zeroes them with memset_zero() before the first micro-step of a step.
 * - Kernels are deterministic: the same inputs on the same device with the same thread
 *   count give bit-identical outputs. Resume and A/B comparisons depend on it.
 * - What the core does on failure: any non-GB_OK status aborts the run with the message
 *   set through host->set_error(), naming the plugin and kernel; nothing is retried.
 *
 * Memory, streams and ordering (ABI 1.2 states what 1.0 left implicit)
 * - Device memory (alloc) belongs to the device. Whether the host may read or write it
 *   is gb_device_ctx.host_access: 1 on the plain CPU device, 0 on a GPU and on the CPU
 *   device's GPU-like mode (`[device] emulate_gpu = true`). Code that runs on the host
 *   (the core, tools, and the host side of every plugin) touches device memory only
 *   through copy(), copy_async() and work queued on a stream, never by dereferencing.
 * - Pinned host memory (alloc_host) is host memory the device can copy from and to
 *   asynchronously; it is what copy_async() stages through.
 * - Every kernel, memset_zero and copy is queued on the compute stream
 *   (gb_device_ctx.stream) and runs in the order queued. A call returns once the work is
 *   queued; on a device without a queue it has also run.
 * - copy(): HOST_TO_DEVICE returns once `src` may be reused (the device-side write lands
 *   in stream order); DEVICE_TO_HOST waits for all earlier work on the compute stream and
 *   returns with `dst` filled (it stalls the host: the steady step avoids it);
 *   DEVICE_TO_DEVICE is queued and returns at once.
 * - copy_async() and events are the non-blocking path: the host may touch a pinned
 *   buffer that a queued copy reads or writes only after an event recorded behind the
 *   copy has completed (event_query() says GB_OK, or event_sync() returned).
 * - A second stream (stream_create, for the comm plugin) runs concurrently with the
 *   compute stream; the only order between two streams is what event_record() on one and
 *   stream_wait_event() on the other establish.
 * - sync() waits for every stream of the device.
 *
 * The device as data (ABI 1.6)
 * - describe() says, before create() and without an instance, what the device is: its
 *   family name, the memory kind of its buffers, the dtypes it computes natively, the
 *   precision `[precision] plugin = auto` takes on it and whether it is asynchronous
 *   (gb_device_desc). The core decides from that data, never from a device's name or bit.
 * - The stream and event entries (alloc_host to enqueue_host) are optional as a group. A
 *   synchronous device (every call has finished when it returns) whose buffers are host
 *   memory leaves all twelve NULL; the core then gives its callers the obvious defaults:
 *   pinned memory is ordinary host memory, copy_async is a memcpy, streams and events are
 *   tokens whose waits return at once, and enqueue_host runs the function inline. A device
 *   that fills some but not all of them is refused, naming the missing entries.
 */
#ifndef GEARBOX_DEVICE_H
#define GEARBOX_DEVICE_H

#include "gearbox/plugin.h"
#include "gearbox/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

struct gb_device_ops;

/* What plugins of the other kinds receive at create(): where to run, and (1.2) the
 * device's own services, so an attention or optimizer plugin runs its GEMMs, events and
 * queued work through the device instead of opening a BLAS handle or stream of its own. */
typedef struct gb_device_ctx {
    size_t struct_size;
    uint32_t device;     /* the device's fixed GB_DEVICE_* bit (one at most); 0 for a
                            device of a family of its own (1.6: see `memory`) */
    int32_t ordinal;     /* device index within its kind (0 on the CPU) */
    void *stream;        /* the compute stream: cudaStream_t on CUDA; on the CPU NULL, or
                            the device's own queue handle in its GPU-like mode */

    /* ---- ABI 1.2 ---- */
    const struct gb_device_ops *ops;  /* the device's vtable ... */
    void *self;                       /* ... and its instance: ops->matmul(self, ...) */
    uint32_t host_access;   /* 1: the host may dereference device memory (plain CPU);
                               0: only queued work may (GPU, GPU-like CPU mode) */
    int32_t cc_major, cc_minor;       /* CUDA compute capability; 0.0 elsewhere */
    uint32_t caps;                    /* the device's GB_CAP_* bits (descriptor data) */

    /* ---- ABI 1.6 (set by the core from gb_device_desc; a device may leave it) ---- */
    uint32_t memory;                  /* gb_memory_kind of the device's buffers */
} gb_device_ctx;

/* What the device says about itself (for the memory plan, metrics and `gearbox doctor`). */
typedef struct gb_device_info {
    size_t struct_size;
    char name[128];              /* e.g. "Intel(R) Xeon(R) Platinum 8488C, 2 threads" */
    uint64_t memory_bytes;       /* memory the device can hand out */
    double peak_flops_f32;       /* FLOP/s for f32 matmuls, for MFU; 0 if unknown */
    double peak_flops_bf16;      /* FLOP/s for bf16 matmuls; 0 if unknown */

    /* ---- ABI 1.2 ---- */
    char libraries[256];         /* what it computes with and their versions, e.g.
                                    "oneDNN 3.0.0 (isa avx2)" or "CUDA 13.0, cuBLASLt 13.1" */
    uint64_t free_bytes;         /* memory free now (for batch_size = auto) */
    int32_t cc_major, cc_minor;  /* CUDA compute capability; 0.0 elsewhere */
    char driver[64];             /* driver version, "" where there is none */

    /* ---- ABI 1.4 ---- */
    char pci_bus_id[32];         /* the GPU's PCI address, "0000:65:00.0" (how NVML and
                                    nvidia-smi find it whatever CUDA numbers it); "" where
                                    there is none */
} gb_device_info;

/* Where a device's buffers live (ABI 1.6). */
typedef enum gb_memory_kind {
    GB_MEMORY_UNSTATED = 0,  /* a device built before 1.6: its fixed bit says (the CPU's
                                buffers are host memory, CUDA's are not) */
    GB_MEMORY_HOST = 1,      /* host memory: host code ordered with gb_device_run_host may
                                read and write it; plugins declaring GB_DEVICE_ANY_HOST run
                                on the device */
    GB_MEMORY_DEVICE = 2     /* memory only the device's own kernels touch (a GPU's) */
} gb_memory_kind;

/* What a device is, as data the core decides from (ABI 1.6): the output of describe().
 * The caller zeroes it and sets struct_size; the device writes the fields within it. */
typedef struct gb_device_desc {
    size_t struct_size;
    char family[32];             /* the device's own family name, lower case: "cpu",
                                    "cuda", "toy". Plugin files built for it are named
                                    <kind>-<name>-<family>.so; messages and manifest.json
                                    name the device by it */
    uint32_t memory;             /* gb_memory_kind of alloc()'s buffers */
    uint32_t native_dtypes;      /* GB_DTYPE_BIT() of each dtype its arithmetic computes in
                                    natively, not widened to f32 in software */
    char preferred_precision[16];  /* the precision plugin `[precision] plugin = auto`
                                      takes on it: "fp32", "bf16", "fp16", "tf32" */
    char preferred_why[192];     /* one line: why, e.g. "oneDNN multiplies bf16 on AMX" */
    uint32_t asynchronous;       /* 1: calls queue work, and the stream and event entries
                                    are given; 0: every call has finished when it returns,
                                    and they may be left NULL (the core's defaults run) */
} gb_device_desc;

typedef enum gb_copy_kind {
    GB_COPY_HOST_TO_DEVICE = 0,
    GB_COPY_DEVICE_TO_HOST = 1,
    GB_COPY_DEVICE_TO_DEVICE = 2
} gb_copy_kind;

/* C (m, n) = alpha * op(A) @ op(B) + beta * C (+ bias broadcast over rows), row-major.
 * op(A) is (m, k): A is stored (m, k) with row stride lda, or (k, m) when trans_a.
 * op(B) is (k, n): B is stored (k, n) with row stride ldb, or (n, k) when trans_b.
 * A linear layer out = in @ W^T + b with W (OC, IC) is m=N, n=OC, k=IC, trans_b=1. */
/* What a matmul does to its result before storing it (ABI 1.2). Zero is 1.0's meaning:
 * add `bias` when it is set. GELU forms: exact is x * Phi(x) (erf, PyTorch's F.gelu);
 * tanh is 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), GPT-2's published form. */
typedef enum gb_matmul_epilogue {
    GB_EPILOGUE_DEFAULT = 0,    /* D = alpha AB + beta C (+ bias) */
    GB_EPILOGUE_GELU = 1,       /* aux = alpha AB + bias (pre-activation, for backward);
                                   C = gelu_exact(aux) */
    GB_EPILOGUE_GELU_TANH = 2,  /* the same with the tanh form */
    GB_EPILOGUE_DGELU = 3,      /* C = (alpha AB) * gelu_exact'(aux): backward through GELU */
    GB_EPILOGUE_DGELU_TANH = 4, /* the same with the tanh form */
    GB_EPILOGUE_BIAS_GRAD = 5   /* C = alpha AB + beta C, and bias_grad (m) += the sum over
                                   k of op(A)[i, k]: the bias gradient of a linear layer
                                   when A is dout^T (the dW product) */
} gb_matmul_epilogue;

typedef struct gb_matmul_args {
    size_t struct_size;
    int64_t m, n, k;
    const void *a; int64_t lda; int32_t trans_a; gb_dtype dtype_a;
    const void *b; int64_t ldb; int32_t trans_b; gb_dtype dtype_b;
    void *c; int64_t ldc; gb_dtype dtype_c;
    float alpha, beta;
    const float *bias;          /* (n) or NULL */

    /* ---- ABI 1.2 (zero keeps 1.0's meaning; the core sets them only for a device whose
     *      caps declare GB_CAP_MATMUL_BATCHED / _EPILOGUES / GB_CAP_TF32) ---- */
    int64_t batch;              /* 0 or 1: one product; n > 1: `batch` products ... */
    int64_t stride_a, stride_b, stride_c;  /* ... the i-th at a + i*stride_a, ... (elements) */
    gb_matmul_epilogue epilogue;
    void *aux;                  /* (m, n) act, ldc: GELU's pre-activation, or NULL */
    float *bias_grad;           /* (m) f32 += for GB_EPILOGUE_BIAS_GRAD */
    int32_t allow_tf32;         /* 1: f32 inputs may be rounded to TF32 in the product */

    /* ---- ABI 1.5 (NULL keeps 1.4's meaning) ---- */
    const void *bias_lowp;      /* (n) of dtype_c, or NULL: with a 16-bit C, `bias` already
                                   in C's type (the weights' low-precision copy), for a
                                   device that adds the bias in C's type: it adds these
                                   values instead of rounding `bias` in a kernel of its own
                                   before the product. `bias` is still set, for devices
                                   that add it in f32 or predate the field */
} gb_matmul_args;

/* A dynamic loss scaler (PyTorch GradScaler's rule, with a floor) as plain data in device
 * memory (ABI 1.4), so the overflow check and the scale's update need no host round trip:
 * the precision plugin gives its rule and state (precision.h: scaler_get), the core copies
 * them to the device, and the device's loss_scaler_update moves the state once per
 * optimizer step, reading the squared gradient norm there:
 *   always:                total_steps += 1; nothing else when enabled is 0;
 *   the norm is not finite (found_inf): the step is skipped, skipped_steps += 1,
 *                          growth_tracker = 0, scale = max(min_scale, scale * backoff_factor);
 *   otherwise:             growth_tracker += 1; once it reaches growth_interval:
 *                          growth_tracker = 0 and scale = scale * growth_factor, unless that
 *                          product is inf in f32 (the scale then stays).
 * Each product is computed in double and rounded to f32 once. */
typedef struct gb_loss_scaler {
    double growth_factor;      /* above 1 */
    double backoff_factor;     /* in (0, 1) */
    int64_t growth_interval;   /* at least 1 */
    float min_scale;           /* above 0 */
    int32_t enabled;           /* 0: the scale is not used and no step is skipped */
    float scale;               /* the loss scale in effect */
    uint32_t reserved;         /* 0 */
    int64_t growth_tracker;    /* clean steps since the scale last moved */
    int64_t skipped_steps;     /* steps skipped for found_inf */
    int64_t total_steps;       /* steps the scaler saw */
} gb_loss_scaler;

/* Work a plugin queues on a stream to run on the host in stream order (ABI 1.2). It may
 * touch device memory only on a device with a host-side queue (the CPU); it returns
 * GB_OK or an error it has said through its own host->set_error/log. */
typedef gb_status (*gb_host_fn)(void *arg);

typedef struct gb_device_ops {
    size_t struct_size;

    /* ---- lifetime (ABI 1.0) ---- */
    /* Opens the device. `options` is parallel to the plugin's option table. On failure
     * (e.g. no GPU) returns GB_ERR_DEVICE with a message saying what is missing. */
    gb_status (*create)(const gb_host *host, const gb_value *options, void **self);
    void (*destroy)(void *self);
    /* Output structs: the caller sets out->struct_size; the plugin writes only the fields
     * that lie within it and leaves struct_size alone (docs/abi.md). */
    gb_status (*context)(void *self, gb_device_ctx *out);
    gb_status (*info)(void *self, gb_device_info *out);

    /* ---- memory (ABI 1.0) ---- */
    /* At least 64-byte aligned. GB_ERR_NO_MEMORY when the device is full. */
    gb_status (*alloc)(void *self, size_t bytes, void **ptr);
    void (*free)(void *self, void *ptr);
    gb_status (*copy)(void *self, void *dst, const void *src, size_t bytes, gb_copy_kind kind);
    gb_status (*memset_zero)(void *self, void *ptr, size_t bytes);
    /* Waits until all queued work is done. */
    gb_status (*sync)(void *self);

    /* ---- kernels (ABI 1.0) ---- */
    gb_status (*matmul)(void *self, const gb_matmul_args *args);

    /* out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]
     * out act (B, T, C); tokens (B, T) i32, each < V; wte (V, C); wpe (T_max >= T, C). */
    gb_status (*embed_forward)(void *self, gb_dtype dtype, void *out, const int32_t *tokens,
                               const float *wte, const float *wpe, int64_t B, int64_t T,
                               int64_t C);
    /* dwte += scatter of dout by token, dwpe += sum over batch of dout.
     * dout act (B, T, C); dwte (V, C) +=; dwpe (T_max, C) +=. */
    gb_status (*embed_backward)(void *self, gb_dtype dtype, float *dwte, float *dwpe,
                                const void *dout, const int32_t *tokens, int64_t B,
                                int64_t T, int64_t C);

    /* out = (x - mean) * rstd * weight + bias, per row, with biased variance.
     * out, x act (N, C); weight (C); bias (C) or NULL; mean, rstd (N) saved for backward. */
    gb_status (*layernorm_forward)(void *self, gb_dtype dtype, void *out, float *mean,
                                   float *rstd, const void *x, const float *weight,
                                   const float *bias, int64_t N, int64_t C, float eps);
    /* dx +=, dweight +=, dbias += (dbias may be NULL).
     * dx, dout, x act (N, C); weight (C); mean, rstd (N) from the forward pass. */
    gb_status (*layernorm_backward)(void *self, gb_dtype dtype, void *dx, float *dweight,
                                    float *dbias, const void *dout, const void *x,
                                    const float *weight, const float *mean,
                                    const float *rstd, int64_t N, int64_t C);

    /* out = GELU(x) with the exact erf form (PyTorch's default F.gelu). act (n). */
    gb_status (*gelu_forward)(void *self, gb_dtype dtype, void *out, const void *x, int64_t n);
    /* dx = dout * GELU'(x); dx may alias dout. act (n). */
    gb_status (*gelu_backward)(void *self, gb_dtype dtype, void *dx, const void *x,
                               const void *dout, int64_t n);

    /* out = a + b; out may alias a or b. act (n). */
    gb_status (*add)(void *self, gb_dtype dtype, void *out, const void *a, const void *b,
                     int64_t n);

    /* dbias += sum over rows of dout. dout act (N, C); dbias (C). */
    gb_status (*bias_backward)(void *self, gb_dtype dtype, float *dbias, const void *dout,
                               int64_t N, int64_t C);

    /* Softmax cross-entropy over the first V columns of each row, fused with its gradient.
     * logits act (N, V); targets (N) i32; losses (N) f32 = -log softmax(logits)[target].
     * When dlogits is not NULL: dlogits = (softmax(logits) - onehot(target)) * dloss,
     * where dloss is the gradient of the final loss with respect to each row's loss
     * (1/N for a mean over N rows). dlogits act (N, V) may alias logits. */
    gb_status (*cross_entropy)(void *self, gb_dtype dtype, float *losses, void *dlogits,
                               const void *logits, const int32_t *targets, int64_t N,
                               int64_t V, float dloss);

    /* *out = sum of x[i]^2 over n f32 values, written to device memory (a global gradient
     * norm needs no host round trip). out is one f32. */
    gb_status (*sum_squares)(void *self, float *out, const float *x, int64_t n);

    /* ---- ABI 1.2: GELU's tanh form (optional; NULL when caps lack GB_CAP_GELU_TANH) ---- */
    gb_status (*gelu_tanh_forward)(void *self, gb_dtype dtype, void *out, const void *x,
                                   int64_t n);
    gb_status (*gelu_tanh_backward)(void *self, gb_dtype dtype, void *dx, const void *x,
                                    const void *dout, int64_t n);

    /* ---- ABI 1.2: pinned host memory, streams, events, queued host work ----
     * All mandatory for a device built for 1.2 to 1.5; since 1.6 optional as a group (all
     * twelve or none, see the opening comment). `stream` NULL means the compute stream. */
    /* Host memory the device copies asynchronously (cudaHostAlloc); 64-byte aligned. */
    gb_status (*alloc_host)(void *self, size_t bytes, void **ptr);
    void (*free_host)(void *self, void *ptr);
    /* Queued on `stream`; the host side of the copy must be alloc_host() memory. */
    gb_status (*copy_async)(void *self, void *dst, const void *src, size_t bytes,
                            gb_copy_kind kind, void *stream);
    /* A second stream, e.g. for collectives that overlap compute. */
    gb_status (*stream_create)(void *self, void **stream);
    void (*stream_destroy)(void *self, void *stream);
    gb_status (*event_create)(void *self, void **event);
    void (*event_destroy)(void *self, void *event);
    /* Marks the point of `stream` after everything queued on it so far. */
    gb_status (*event_record)(void *self, void *event, void *stream);
    /* Work queued on `stream` after this call starts after `event` completed. */
    gb_status (*stream_wait_event)(void *self, void *stream, void *event);
    /* GB_OK when the work before `event` has completed, GB_ERR_NOT_READY when not yet. */
    gb_status (*event_query)(void *self, void *event);
    /* Blocks the host until `event` has completed. */
    gb_status (*event_sync)(void *self, void *event);
    /* Queues fn(copy of arg_bytes bytes at arg) on `stream`: it runs on the host after
     * the work queued before it and before the work queued after it. The device copies
     * the argument, so the caller's may go out of scope. A failure of fn is returned by
     * the next sync(), event_sync() or DEVICE_TO_HOST copy. */
    gb_status (*enqueue_host)(void *self, void *stream, gb_host_fn fn, const void *arg,
                              size_t arg_bytes);

    /* ---- ABI 1.3: padded rows (optional; NULL: the core keeps its logits contiguous) ---- */
    /* cross_entropy over rows `ld` elements apart (ld >= V), as a padded vocabulary lays
     * out the logits: the first V columns of each row are the classes; columns V to ld - 1
     * are neither read nor written. logits act (N, ld); dlogits act (N, ld) or NULL, may
     * alias logits; the rest as cross_entropy. */
    gb_status (*cross_entropy_ld)(void *self, gb_dtype dtype, float *losses, void *dlogits,
                                  const void *logits, int64_t ld, const int32_t *targets,
                                  int64_t N, int64_t V, float dloss);

    /* ---- ABI 1.4: the loss scale on the device (optional, both or neither; NULL: the
     *      core reads the gradient norm back and runs the precision plugin's scaler) ---- */
    /* cross_entropy_ld with the loss gradient multiplied by a device scalar:
     * dlogits = (softmax(logits) - onehot(target)) * (dloss * *dloss_scale), that product
     * rounded to f32 once. dloss_scale (one f32 of device memory, the scale the device's
     * loss_scaler_update moves) is read by the queued work. */
    gb_status (*cross_entropy_scaled)(void *self, gb_dtype dtype, float *losses,
                                      void *dlogits, const void *logits, int64_t ld,
                                      const int32_t *targets, int64_t N, int64_t V,
                                      float dloss, const float *dloss_scale);
    /* One optimizer step of the loss scaler `scaler` (device memory) by gb_loss_scaler's
     * rule, found_inf being whether *norm_sq (device memory) is not finite. Queued. */
    gb_status (*loss_scaler_update)(void *self, gb_loss_scaler *scaler, const float *norm_sq);

    /* ---- ABI 1.4 too: graphs of the compute stream's work (optional; all four or none;
     *      NULL: the device records no graphs, and the core queues every call) ----
     * Between graph_begin and graph_end, the work that calls queue on the compute stream
     * (the device's kernels and copies, and those other plugins queue there) is recorded,
     * not run. graph_launch queues the recorded work again, in its order, with the
     * arguments each call had when it was recorded: the same pointers and the same
     * scalars, so what changes from one launch to the next must be in device memory.
     * While recording, the caller makes no call that waits for the device (sync, a copy
     * to the host, event_sync or event_query), allocates or frees, copies host memory,
     * waits on an event recorded before graph_begin or queues host work (enqueue_host);
     * on a GPU such a call fails and graph_end then fails too, saying which call broke the
     * recording. A graph is launched on the compute stream, in order with the rest of its
     * work, as often as wanted, and destroyed once no longer wanted (its queued launches
     * still run). */
    gb_status (*graph_begin)(void *self);
    gb_status (*graph_end)(void *self, void **graph);
    gb_status (*graph_launch)(void *self, void *graph);
    void (*graph_destroy)(void *self, void *graph);

    /* ---- ABI 1.5: the residual add fused into the LayerNorm after it (optional; NULL:
     *      the core calls add, then layernorm_forward) ---- */
    /* sum = a + b, rounded to dtype, then out = layernorm_forward of that rounded sum, in
     * one pass over each row: the bits of add followed by layernorm_forward.
     * sum, a, b act (N, C); sum may alias a or b; out act (N, C); the rest as
     * layernorm_forward. */
    gb_status (*add_layernorm_forward)(void *self, gb_dtype dtype, void *sum, void *out,
                                       float *mean, float *rstd, const void *a, const void *b,
                                       const float *weight, const float *bias, int64_t N,
                                       int64_t C, float eps);

    /* ---- ABI 1.6: the device as data (mandatory for a 1.6 device) ---- */
    /* Fills `out` (gb_device_desc). Called before create(), with no instance: cheap, no
     * side effects, the same answer for the life of the process. `host` serves log and
     * set_error only. */
    gb_status (*describe)(const gb_host *host, gb_device_desc *out);

    /* ---- ABI 1.7: dropout (optional; NULL: the core refuses [model] dropout > 0) ---- */
    /* out[i] = in[i] * keep(seed, i) / (1 - p) for i in [0, n), else 0: inverted dropout
     * with drop probability p in [0, 1). keep(seed, i) must be a pure function of the
     * seed and the element's index, never of the thread count or launch shape, so that
     * the backward pass regenerates the mask by calling dropout on the gradient with the
     * forward's seed. gearbox's devices draw it by kernels/common/dropout.h (a counter
     * hash of seed and i), so they drop the same elements. in, out act (n); out may
     * alias in. Queued like the other kernels. */
    gb_status (*dropout)(void *self, gb_dtype dtype, void *out, const void *in, int64_t n,
                         float p, uint64_t seed);   /* ABI 1.7 */
} gb_device_ops;

/* Whether the device vtable `ops` has the optional `entry`: within its struct_size (a
 * plugin built for an older minor lacks the entries appended since) and not NULL. */
#define GB_DEVICE_HAS(ops, entry)                                                         \
    ((ops)->struct_size >= offsetof(gb_device_ops, entry) + sizeof((ops)->entry) &&      \
     (ops)->entry != NULL)

/* Whether the buffers of the device of `ctx` are host memory (GB_MEMORY_HOST), which a
 * plugin declaring GB_DEVICE_ANY_HOST needs: the memory kind where the core stated it
 * (1.6), else the fixed bit's meaning (only the CPU device's buffers are host memory). */
static inline int gb_device_memory_is_host(const gb_device_ctx *ctx)
{
    if (ctx->struct_size >= offsetof(gb_device_ctx, memory) + sizeof ctx->memory &&
        ctx->memory != GB_MEMORY_UNSTATED)
        return ctx->memory == GB_MEMORY_HOST;
    return ctx->device == GB_DEVICE_CPU;
}

/* Runs fn(arg) in stream order on the device of `ctx`: through enqueue_host on a 1.2
 * device, at once on an older device (whose memory the host may touch and whose work has
 * all run when its calls return). How CPU plugins of the other kinds stay correct on a
 * device with a queue. */
static inline gb_status gb_device_run_host(const gb_device_ctx *ctx, gb_host_fn fn, void *arg,
                                           size_t arg_bytes)
{
    if (ctx->struct_size >= offsetof(gb_device_ctx, self) + sizeof ctx->self && ctx->ops &&
        ctx->ops->struct_size > offsetof(struct gb_device_ops, enqueue_host) &&
        ctx->ops->enqueue_host)
        return ctx->ops->enqueue_host(ctx->self, ctx->stream, fn, arg, arg_bytes);
    return fn(arg);
}

#ifdef __cplusplus
}
#endif
#endif /* GEARBOX_DEVICE_H */
