/* gearbox plugin contract: the one header every plugin starts from.
 *
 * A plugin is a shared object that exports exactly one symbol, GB_PLUGIN_ENTRY_NAME,
 * a side-effect-free function returning a pointer to a `static const gb_plugin_desc`.
 * The descriptor says which ABI it was built against, what kind of plugin it is, which
 * devices it runs on, which configuration keys it accepts (the schema, as data) and
 * where its kind-specific vtable is. Real work starts only in the vtable's create().
 *
 * Plugins link against nothing of the core: everything they need from the host
 * (logging, error messages, memory) comes through the gb_host table handed to create().
 * Plugins never print, exit or abort; they return a gb_status and, on failure, say why
 * through host->set_error().
 *
 * Growth rules (docs/abi.md has the full policy): every struct that crosses the boundary
 * starts with its own size and only ever grows by appending fields; the reader checks
 * the size before touching a field added in a later minor version. A change that is not
 * an append bumps GB_ABI_MAJOR, and the core refuses plugins of another major.
 *
 * When ABI 2 comes, it comes beside 1, as NCCL's plugin versions do: a 2.x plugin exports
 * `gearbox_plugin_entry_v2` (and may keep exporting this symbol for 1.x cores); the core
 * looks the versioned symbols up newest first and adapts a 1.x descriptor through one
 * shim, so plugins built for 1.x keep loading for as long as the shim is kept.
 */
#ifndef GEARBOX_PLUGIN_H
#define GEARBOX_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GB_ABI_MAJOR 1
#define GB_ABI_MINOR 8

/* The symbol the core looks up with dlsym(); its type is gb_plugin_entry_fn. */
#define GB_PLUGIN_ENTRY_NAME "gearbox_plugin_entry"

/* Result of every fallible call across the boundary. Values are frozen for ABI 1. */
typedef enum gb_status {
    GB_OK = 0,               /* success */
    GB_ERR_INVALID_ARG = 1,  /* a caller passed something the contract forbids */
    GB_ERR_CONFIG = 2,       /* a configuration value is unusable (the message names the key) */
    GB_ERR_UNSUPPORTED = 3,  /* valid request this plugin cannot serve (dtype, shape, device) */
    GB_ERR_NO_MEMORY = 4,    /* an allocation failed on the host or on the device */
    GB_ERR_DEVICE = 5,       /* the device or its runtime failed (no GPU, driver error) */
    GB_ERR_SYSTEM = 6,       /* an operating-system call failed (file, network, process) */
    GB_ERR_INTERNAL = 7,     /* a bug: an invariant of the plugin itself did not hold */
    GB_ERR_NOT_READY = 8     /* ABI 1.2: queued work has not finished yet (event_query);
                                not a failure */
} gb_status;

/* The plugin kinds; one vtable header each. */
typedef enum gb_kind {
    GB_KIND_DEVICE = 1,      /* gearbox/device.h */
    GB_KIND_ATTN = 2,        /* gearbox/attn.h */
    GB_KIND_OPTIM = 3,       /* gearbox/optim.h */
    GB_KIND_PRECISION = 4,   /* gearbox/precision.h */
    GB_KIND_COMM = 5         /* gearbox/comm.h */
} gb_kind;

/* Device bits, for gb_plugin_desc.devices and gb_device_ctx.device. The two fixed bits name
 * the devices gearbox ships (their meaning is frozen for ABI 1); since 1.6 a device is
 * described by data (device.h: gb_device_desc, its own family name and memory kind), so a
 * device of another family needs no bit of its own and sets none. */
#define GB_DEVICE_CPU  (1u << 0)
#define GB_DEVICE_CUDA (1u << 1)
/* ABI 1.6, for plugins of the other kinds: runs on any device whose buffers are host
 * memory (gb_device_desc.memory is GB_MEMORY_HOST), touching them only from work ordered
 * with gb_device_run_host() (device.h). A plugin that needs one device's memory (CUDA)
 * declares that device's bit instead. A device plugin never declares it. */
#define GB_DEVICE_ANY_HOST (1u << 16)
/* Since 1.8 a plugin of another kind may also name the device families it runs on
 * (gb_plugin_desc.families, matched against gb_device_desc.family): how a plugin written
 * for a device of a family of its own, whose memory the host cannot read, finds it.
 * GB_FAMILY_ANY among them: runs on every device, whatever its memory, because it never
 * touches a device buffer (a precision policy, a world of one). */
#define GB_FAMILY_ANY "*"

/* ---- capabilities (ABI 1.2) ---------------------------------------------------------- */

/* gb_plugin_desc.dtypes: one bit per gb_dtype the plugin computes in (device and attn:
 * activations; optim: the low-precision copies it writes; comm: what it reduces). */
#define GB_DTYPE_BIT(dtype) (1u << (unsigned)(dtype))

/* gb_plugin_desc.caps: what a plugin can do, as data, so `gearbox check` refuses a
 * combination before any work instead of a kernel failing at step 1. */
#define GB_CAP_DETERMINISTIC       (1u << 0)  /* same inputs, same bits, run after run */
#define GB_CAP_LOWP_COPY           (1u << 1)  /* optim: writes params_lowp in its step */
#define GB_CAP_STOCHASTIC_ROUNDING (1u << 2)  /* optim: honours lowp_stochastic (bf16) */
#define GB_CAP_MATMUL_BATCHED      (1u << 3)  /* device: gb_matmul_args.batch and strides */
#define GB_CAP_MATMUL_EPILOGUES    (1u << 4)  /* device: gb_matmul_args.epilogue */
#define GB_CAP_GELU_TANH           (1u << 5)  /* device: gelu_tanh_forward/backward */
#define GB_CAP_TF32                (1u << 6)  /* device, attn: honours allow_tf32 */
#define GB_CAP_QUEUED_MEMORY       (1u << 7)  /* attn, optim, comm: never touches device
                                                 memory from the calling thread; all its
                                                 work is ordered on the device's streams
                                                 (kernels, or gb_device_enqueue_host) */
#define GB_CAP_DEVICE_LOSS_SCALE   (1u << 8)  /* optim (ABI 1.4): honours
                                                 gb_optim_step_args.loss_scale */
#define GB_CAP_RANGE_STEP          (1u << 9)  /* optim (ABI 1.8): steps any contiguous range
                                                 of the flat buffers alone, its state
                                                 per element (state_bytes(n) = k * 4n, k
                                                 planes of n f32, plane j of element i at
                                                 float j * n + i), so [optim] shard_state
                                                 can give each rank a shard */
/* Set by GB_PLUGIN_DEFINE, and assumed for plugins built before 1.2: the plugin declared
 * nothing, so the core checks dtypes and features at call time, as 1.0 and 1.1 did.
 * Declared capabilities come from GB_PLUGIN_DEFINE_CAPS. */
#define GB_CAPS_UNDECLARED         (1u << 31)

/* ---- configuration schema ------------------------------------------------------------ */

/* The type of one configuration key. */
typedef enum gb_option_type {
    GB_OPT_INT = 0,     /* 64-bit signed integer, range [min, max] */
    GB_OPT_FLOAT = 1,   /* double, range [min, max] */
    GB_OPT_BOOL = 2,    /* true/false, yes/no, on/off, 1/0 */
    GB_OPT_STRING = 3,  /* any text */
    GB_OPT_ENUM = 4     /* one of `choices`, a '|'-separated list such as "none|static|dynamic" */
} gb_option_type;

/* One key of a plugin's section, declared as data (like FFmpeg's AVOption). The core
 * parses and validates the INI text against this table before any plugin is created,
 * so plugins never see text they have to parse. */
typedef struct gb_option {
    const char *key;            /* lower_snake_case name in the plugin's INI section */
    gb_option_type type;
    const char *default_value;  /* written as it would be in the INI file; never NULL */
    double min, max;            /* inclusive range for INT and FLOAT; ignored otherwise */
    const char *choices;        /* ENUM only: "a|b|c"; NULL otherwise */
    const char *help;           /* one line, shown by `gearbox plugins show` */
} gb_option;

/* A validated configuration value, handed to create() as an array parallel to the
 * plugin's option table: values[i] belongs to options[i]. */
typedef union gb_value {
    int64_t i;        /* GB_OPT_INT, GB_OPT_BOOL (0 or 1) and GB_OPT_ENUM (index into choices) */
    double f;         /* GB_OPT_FLOAT */
    const char *s;    /* GB_OPT_STRING; owned by the core, valid until destroy() */
} gb_value;

/* ---- host services ------------------------------------------------------------------- */

typedef enum gb_log_level {
    GB_LOG_ERROR = 0,
    GB_LOG_WARN = 1,
    GB_LOG_INFO = 2,
    GB_LOG_DEBUG = 3
} gb_log_level;

/* What the core offers a plugin instance. Passed to create(); valid until destroy().
 * Every function is thread-safe. Fields are only appended (check struct_size). */
typedef struct gb_host {
    size_t struct_size;
    uint16_t abi_major, abi_minor;   /* the core's ABI version */

    /* Log a line, attributed to the calling plugin. */
    void (*log)(const struct gb_host *host, gb_log_level level, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
    /* Say why the call that is about to return an error failed. The core shows this
     * message with the plugin's name; the last call before returning wins. */
    void (*set_error)(const struct gb_host *host, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
    /* Host memory for a plugin's own bookkeeping (not tensors); 64-byte aligned.
     * Returns NULL when out of memory. */
    void *(*alloc)(const struct gb_host *host, size_t bytes);
    void (*free)(const struct gb_host *host, void *ptr);

    int num_threads;     /* the run's thread count ([run] threads); plugins use no more */
    void *core_private;  /* the core's own context; plugins must not touch it */

    /* ---- ABI 1.2 ---- */
    /* Device plugins: the device index this process uses within its kind, chosen by the
     * core: [device] ordinal when set, else the launcher's local rank (LOCAL_RANK from
     * torchrun, OMPI_COMM_WORLD_LOCAL_RANK from Open MPI), else 0. A device plugin opens
     * exactly this one; the rank's GPU is never a plugin's own guess. Other kinds read
     * the device's gb_device_ctx.ordinal. */
    int32_t device_ordinal;
} gb_host;

/* ---- the descriptor ------------------------------------------------------------------ */

typedef struct gb_plugin_desc {
    size_t struct_size;         /* sizeof(gb_plugin_desc) as the plugin was compiled */
    uint16_t abi_major;         /* GB_ABI_MAJOR the plugin was compiled against */
    uint16_t abi_minor;         /* GB_ABI_MINOR the plugin was compiled against */
    gb_kind kind;
    const char *name;           /* what `[kind] plugin = NAME` selects, e.g. "math" */
    const char *version;        /* the plugin's own version, e.g. "1.0.0" */
    const char *description;    /* one line */
    uint32_t devices;           /* GB_DEVICE_* bits this object runs on; a device plugin:
                                   its own fixed bit, or (1.6) 0 for a family of its own;
                                   (1.8) 0 when `families` says where it runs */
    const gb_option *options;   /* the config schema; may be NULL when n_options is 0 */
    size_t n_options;
    const void *ops;            /* the kind's vtable, e.g. const gb_attn_ops *; starts with
                                   its own struct_size */

    /* ---- ABI 1.2 ---- */
    uint32_t dtypes;            /* GB_DTYPE_BIT() of each dtype it computes in; 0 with
                                   GB_CAPS_UNDECLARED */
    uint32_t caps;              /* GB_CAP_* bits, or GB_CAPS_UNDECLARED */

    /* ---- ABI 1.8 ---- */
    const char *families;       /* plugins of the other kinds: the device families it runs
                                   on besides what `devices` says, by gb_device_desc.family,
                                   comma-separated ("toy-npu", "cpu,toy-npu"); NULL or "":
                                   `devices` alone. A device plugin leaves it NULL: its
                                   describe() names its family */
} gb_plugin_desc;

typedef const gb_plugin_desc *(*gb_plugin_entry_fn)(void);

#if defined(__GNUC__)
#define GB_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define GB_PLUGIN_EXPORT
#endif

/* Defines the entry symbol and its descriptor, filling in the size and ABI version so
 * plugin authors cannot get them wrong. Use once per shared object:
 *
 *   GB_PLUGIN_DEFINE(GB_KIND_ATTN, "math", "1.0.0", "materialises the T x T scores",
 *                    GB_DEVICE_CPU, math_options, math_ops);
 *
 * `options_array` must be a real array (or the macro GB_NO_OPTIONS); `ops` is the
 * kind's vtable object (not a pointer). */
#define GB_NO_OPTIONS ((const gb_option *)0), 0
#define GB_OPTIONS(array) (array), (sizeof(array) / sizeof((array)[0]))

#define GB_PLUGIN_DEFINE(kind_, name_, version_, description_, devices_, options_, ops_) \
    GB_PLUGIN_ENTRY_(kind_, name_, version_, description_, devices_, GB_NO_FAMILIES, 0u,   \
                     GB_CAPS_UNDECLARED, ops_, options_)

/* The same, with the capabilities declared (ABI 1.2), which `gearbox check` relies on:
 *
 *   GB_PLUGIN_DEFINE_CAPS(GB_KIND_OPTIM, "adamw", "1.0.0", "reference AdamW", GB_DEVICE_CPU,
 *                         GB_DTYPE_BIT(GB_F32), GB_CAP_DETERMINISTIC | GB_CAP_QUEUED_MEMORY,
 *                         GB_OPTIONS(adamw_options), adamw_ops); */
#define GB_PLUGIN_DEFINE_CAPS(kind_, name_, version_, description_, devices_, dtypes_,    \
                              caps_, options_, ops_)                                      \
    GB_PLUGIN_ENTRY_(kind_, name_, version_, description_, devices_, GB_NO_FAMILIES,      \
                     dtypes_, caps_, ops_, options_)

/* Shared body of the two; the options come last because GB_OPTIONS() is two arguments. */
#define GB_NO_FAMILIES ((const char *)0)
#define GB_PLUGIN_ENTRY_(kind_, name_, version_, description_, devices_, families_, dtypes_, \
                         caps_, ops_, ...)                                                   \
    GB_PLUGIN_EXPORT const gb_plugin_desc *gearbox_plugin_entry(void);                      \
    GB_PLUGIN_EXPORT const gb_plugin_desc *gearbox_plugin_entry(void)                       \
    {                                                                                        \
        static const gb_plugin_desc desc = {                                                 \
            sizeof(gb_plugin_desc), GB_ABI_MAJOR, GB_ABI_MINOR, (kind_), (name_),            \
            (version_), (description_), (devices_), __VA_ARGS__, &(ops_), (dtypes_),         \
            (caps_), (families_)};                                                           \
        return &desc;                                                                        \
    }

/* ---- one-declaration plugin tails -----------------------------------------------------
 *
 * A plugin's ops table and its descriptor in one declaration: the table gets its
 * struct_size filled in, then the entries follow as designated initializers (in C; CUDA
 * C++ lists them in the vtable's order). Dtypes and caps are as GB_PLUGIN_DEFINE_CAPS
 * takes them (0u and GB_CAPS_UNDECLARED declare nothing, as GB_PLUGIN_DEFINE does):
 *
 *   GB_ATTN_PLUGIN("math", "1.0.0", "materialises the T x T scores", GB_DEVICE_CPU,
 *                  GB_DTYPE_BIT(GB_F32), GB_CAP_DETERMINISTIC, GB_NO_OPTIONS,
 *                  .create = math_create, .destroy = math_destroy, ...);
 *
 * The kind's header (gearbox/attn.h for GB_ATTN_PLUGIN) must be included. Use once per
 * shared object; GB_PLUGIN_DEFINE and GB_PLUGIN_DEFINE_CAPS stay for a separate table.
 * The table is named GB_PLUGIN_OPS: a device, whose context() hands its own vtable out
 * (gb_device_ctx.ops), declares `static const gb_device_ops GB_PLUGIN_OPS;` above it. */
#define GB_PLUGIN_OPS gb_plugin_ops_
#define GB_DEVICE_PLUGIN(...) \
    GB_PLUGIN_WITH_OPS_(GB_KIND_DEVICE, gb_device_ops, GB_NO_FAMILIES, __VA_ARGS__)
#define GB_ATTN_PLUGIN(...) GB_ATTN_PLUGIN_FOR(GB_NO_FAMILIES, __VA_ARGS__)
#define GB_OPTIM_PLUGIN(...) GB_OPTIM_PLUGIN_FOR(GB_NO_FAMILIES, __VA_ARGS__)
#define GB_PRECISION_PLUGIN(...) GB_PRECISION_PLUGIN_FOR(GB_NO_FAMILIES, __VA_ARGS__)
#define GB_COMM_PLUGIN(...) GB_COMM_PLUGIN_FOR(GB_NO_FAMILIES, __VA_ARGS__)

/* The same for a plugin that names the device families it runs on (ABI 1.8,
 * gb_plugin_desc.families), ahead of the other arguments:
 *
 *   GB_OPTIM_PLUGIN_FOR("toy-npu", "adamw", "1.0.0", "AdamW on the toy NPU", 0u,
 *                       GB_DTYPE_BIT(GB_F32), GB_CAP_DETERMINISTIC, GB_NO_OPTIONS,
 *                       .create = ..., ...); */
#define GB_ATTN_PLUGIN_FOR(families_, ...) \
    GB_PLUGIN_WITH_OPS_(GB_KIND_ATTN, gb_attn_ops, families_, __VA_ARGS__)
#define GB_OPTIM_PLUGIN_FOR(families_, ...) \
    GB_PLUGIN_WITH_OPS_(GB_KIND_OPTIM, gb_optim_ops, families_, __VA_ARGS__)
#define GB_PRECISION_PLUGIN_FOR(families_, ...) \
    GB_PLUGIN_WITH_OPS_(GB_KIND_PRECISION, gb_precision_ops, families_, __VA_ARGS__)
#define GB_COMM_PLUGIN_FOR(families_, ...) \
    GB_PLUGIN_WITH_OPS_(GB_KIND_COMM, gb_comm_ops, families_, __VA_ARGS__)

/* Shared body: GB_OPTIONS() and GB_NO_OPTIONS have become two arguments by the time the
 * arguments arrive here (options_, n_options_). */
#define GB_PLUGIN_WITH_OPS_(kind_, ops_type_, families_, name_, version_, description_,    \
                            devices_, dtypes_, caps_, options_, n_options_, ...)           \
    static const ops_type_ GB_PLUGIN_OPS = {sizeof(ops_type_), __VA_ARGS__};               \
    GB_PLUGIN_ENTRY_(kind_, name_, version_, description_, devices_, families_, dtypes_,  \
                     caps_, GB_PLUGIN_OPS, options_, n_options_)

#ifdef __cplusplus
}
#endif
#endif /* GEARBOX_PLUGIN_H */
