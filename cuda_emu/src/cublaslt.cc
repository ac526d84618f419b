/* The cuBLASLt double: the entry points of cublasLt.h that plugins/device/cuda/matmul.c
 * calls, computed on the CPU over the emulator's device memory.
 *
 *   D = epilogue(alpha op(A) op(B) + beta C [+ bias]),  per batch entry, column-major
 *   unless a layout says CUBLASLT_ORDER_ROW.
 *
 * Covered: A/B/C/D of CUDA_R_32F, CUDA_R_16BF, CUDA_R_16F (A and B of one type, C and D of
 * one type, the pairs cuBLASLt lists for CUBLAS_COMPUTE_32F: f32/f32, bf16/bf16, bf16/f32,
 * f16/f16, f16/f32); compute types CUBLAS_COMPUTE_32F[_PEDANTIC] and, for f32 operands,
 * CUBLAS_COMPUTE_32F_FAST_TF32, _FAST_16BF and _FAST_16F (inputs rounded to nearest even
 * to 10 mantissa bits, to bf16 or to f16 before they are multiplied); scale type
 * CUDA_R_32F; host or device alpha and beta; transposes; strided batches, stride 0
 * broadcasting an input; C == D in place. Epilogues DEFAULT, RELU, BIAS, RELU_BIAS, GELU,
 * GELU_AUX, GELU_BIAS, GELU_AUX_BIAS, DGELU, DGELU_BGRAD, BGRADA and BGRADB, with GELU in
 * cuBLASLt's tanh form, computed from its formulas written here (lt_gelu), not from the
 * kernels' header that device/cuda's element-wise GELU uses, which this double checks.
 *
 * Semantics where cublasLt.h and the cuBLAS documentation leave room, chosen here:
 * - the bias is added after alpha and beta C: D = act(alpha AB + beta C + bias);
 * - GELU_AUX stores act's input (bias included) in aux, of D's type;
 * - DGELU: D = (alpha AB + beta C) * gelu'(aux); DGELU_BGRAD also writes the row sums of
 *   that D (before its rounding to D's type) to the bias pointer;
 * - BGRADA / BGRADB write the sums over k of op(A)'s rows / op(B)'s columns (as
 *   multiplied, so tf32-rounded under FAST_TF32), without alpha; D is the plain product;
 * - beta == 0 does not read C (BLAS convention: C may hold NaN or be NULL).
 *
 * Numerics: the product sums in f32, like the GPU's f32 accumulator, so a test that passes
 * here does not lean on precision a GPU lacks; each element of D is summed over k in
 * increasing order by one thread, and the vector reductions run in a fixed order too, so
 * the bits do not depend on OpenMP's thread count. Rounding into 16-bit types is to
 * nearest even with NaN kept (gearbox/convert.h).
 *
 * Checks, made when cublasLtMatmul is called (what a GPU would only show as a fault):
 * every operand must be device memory large enough for its layout (gb_emu::find_allocation),
 * aligned to its element, and at least as aligned as the heuristic was told when it
 * picked the algorithm (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES, default 256, and the
 * bias and aux pointers the descriptor held then); the workspace 256-byte aligned (the
 * cuBLAS documentation's requirement). A wrong argument returns
 * CUBLAS_STATUS_INVALID_VALUE, what the double (or cuBLASLt) lacks
 * CUBLAS_STATUS_NOT_SUPPORTED, each with one line on stderr that says why (except the
 * heuristic's NOT_SUPPORTED, which callers such as matmul.c expect and fall back from);
 * nothing falls back to a different computation. Everything the computation needs is copied when cublasLtMatmul is called,
 * so descriptors may change or go once it returns. When the matmul runs, every byte it
 * reads (A, B, C when beta is not 0, the bias, DGELU's aux, device alpha and beta) must
 * have been written, else a report (the emulator's initcheck, which sees no access of
 * this double's), and what it writes counts as written.
 *
 * Left out (NOT_SUPPORTED): other data and compute types, FP8 scaling attributes, vector
 * pointer modes, the ReLU bit-mask epilogues (RELU_AUX*, DRELU*), bias or aux epilogues on
 * a row-order D, pointer-array batches, planar complex, tiled orders (COL32 ...).
 */
#include <cublasLt.h>

#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "counters.h"
#include "emu.h"
#include "gearbox/convert.h"

namespace {

/* ---- statuses and messages ---------------------------------------------------------- */

/* The outcome of a check: a status and, when it is not success, why. */
struct verdict {
    cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
    std::string why;
    bool failed() const { return status != CUBLAS_STATUS_SUCCESS; }
};

verdict refuse(cublasStatus_t status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
verdict refuse(cublasStatus_t status, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return verdict{status, text};
}

const verdict kOk{};

/* One stderr line per refused call: a real cuBLASLt would often just fault later, so the
 * emulator says what was wrong where it happened. */
cublasStatus_t complain(const char *function, const verdict &v)
{
    fprintf(stderr, "gearbox cuda emulator: %s: %s (%s)\n", function, v.why.c_str(),
            cublasLtGetStatusName(v.status));
    return v.status;
}

/* ---- objects: handles and attribute-holding descriptors ------------------------------- */

enum class kind { handle, matmul_desc, layout, preference };

/* An attribute as cublasLt.h declares it: its id and the size of its value. */
struct attribute_spec {
    int id;
    size_t size;
};

constexpr int kMaxAttribute = 40;

/* The attributes of one descriptor, each kept as its raw bytes (zero-extended). */
struct lt_object {
    kind what;
    uint64_t value[kMaxAttribute];
};

/* Live objects, so a destroyed or foreign pointer is refused instead of read. */
std::mutex registry_mutex;
std::unordered_map<const void *, lt_object *> registry;

lt_object *create_object(kind what)
{
    lt_object *obj = new (std::nothrow) lt_object;
    if (!obj)
        return nullptr;
    obj->what = what;
    memset(obj->value, 0, sizeof obj->value);
    std::lock_guard<std::mutex> lock(registry_mutex);
    registry[obj] = obj;
    return obj;
}

lt_object *find_object(const void *p, kind what)
{
    std::lock_guard<std::mutex> lock(registry_mutex);
    auto it = registry.find(p);
    return it != registry.end() && it->second->what == what ? it->second : nullptr;
}

cublasStatus_t destroy_object(const void *p, kind what)
{
    if (!p)
        return CUBLAS_STATUS_SUCCESS;   // like free(NULL)
    lt_object *obj;
    {
        std::lock_guard<std::mutex> lock(registry_mutex);
        auto it = registry.find(p);
        if (it == registry.end() || it->second->what != what)
            return CUBLAS_STATUS_INVALID_VALUE;
        obj = it->second;
        registry.erase(it);
    }
    delete obj;
    return CUBLAS_STATUS_SUCCESS;
}

const attribute_spec kDescAttributes[] = {
    {CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, 4}, {CUBLASLT_MATMUL_DESC_SCALE_TYPE, 4},
    {CUBLASLT_MATMUL_DESC_POINTER_MODE, 4}, {CUBLASLT_MATMUL_DESC_TRANSA, 4},
    {CUBLASLT_MATMUL_DESC_TRANSB, 4}, {CUBLASLT_MATMUL_DESC_TRANSC, 4},
    {CUBLASLT_MATMUL_DESC_FILL_MODE, 4}, {CUBLASLT_MATMUL_DESC_EPILOGUE, 4},
    {CUBLASLT_MATMUL_DESC_BIAS_POINTER, sizeof(void *)},
    {CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, 8},
    {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, sizeof(void *)},
    {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, 8}, {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, 8},
    {CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE, 8},
    {CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, 4},
    {CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, sizeof(void *)},
    {CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, sizeof(void *)},
    {CUBLASLT_MATMUL_DESC_C_SCALE_POINTER, sizeof(void *)},
    {CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, sizeof(void *)},
    {CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, sizeof(void *)},
    {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, 4},
    {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER, sizeof(void *)},
    {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER, sizeof(void *)},
    {CUBLASLT_MATMUL_DESC_FAST_ACCUM, 1}, {CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, 4},
    {CUBLASLT_MATMUL_DESC_A_SCALE_MODE, 4}, {CUBLASLT_MATMUL_DESC_B_SCALE_MODE, 4},
    {CUBLASLT_MATMUL_DESC_C_SCALE_MODE, 4}, {CUBLASLT_MATMUL_DESC_D_SCALE_MODE, 4},
    {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE, 4},
    {CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER, sizeof(void *)},
    {CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE, 4},
    {CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR, sizeof(void *)},
};

const attribute_spec kLayoutAttributes[] = {
    {CUBLASLT_MATRIX_LAYOUT_TYPE, 4}, {CUBLASLT_MATRIX_LAYOUT_ORDER, 4},
    {CUBLASLT_MATRIX_LAYOUT_ROWS, 8}, {CUBLASLT_MATRIX_LAYOUT_COLS, 8},
    {CUBLASLT_MATRIX_LAYOUT_LD, 8}, {CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 4},
    {CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 8}, {CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET, 8},
    {CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, 4},
};

const attribute_spec kPreferenceAttributes[] = {
    {CUBLASLT_MATMUL_PREF_SEARCH_MODE, 4}, {CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, 8},
    {CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, 4},
    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, 4},
    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, 4},
    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, 4},
    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, 4},
    {CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT, 4}, {CUBLASLT_MATMUL_PREF_IMPL_MASK, 8},
};

/* The size of attribute `id` in `specs`, 0 when cublasLt.h has no such attribute. */
template <size_t N>
size_t attribute_size(const attribute_spec (&specs)[N], int id)
{
    for (const attribute_spec &spec : specs)
        if (spec.id == id)
            return spec.size;
    return 0;
}

template <size_t N>
cublasStatus_t set_attribute(lt_object *obj, const attribute_spec (&specs)[N], int id,
                             const void *buf, size_t size)
{
    size_t expected = attribute_size(specs, id);
    if (!obj || expected == 0 || !buf || size != expected)
        return CUBLAS_STATUS_INVALID_VALUE;
    obj->value[id] = 0;
    memcpy(&obj->value[id], buf, size);
    return CUBLAS_STATUS_SUCCESS;
}

/* cublasLt.h's get protocol: size 0 asks for the size through size_written. */
template <size_t N>
cublasStatus_t get_attribute(const lt_object *obj, const attribute_spec (&specs)[N], int id,
                             void *buf, size_t size, size_t *size_written)
{
    size_t expected = attribute_size(specs, id);
    if (!obj || expected == 0 || (size == 0 && !size_written))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (size == 0) {
        *size_written = expected;
        return CUBLAS_STATUS_SUCCESS;
    }
    if (!buf || size != expected)
        return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(buf, &obj->value[id], size);
    if (size_written)
        *size_written = size;
    return CUBLAS_STATUS_SUCCESS;
}

template <class T>
T attribute(const lt_object *obj, int id)
{
    T value;
    memcpy(&value, &obj->value[id], sizeof value);
    return value;
}

template <class T>
void set_default(lt_object *obj, int id, T value)
{
    obj->value[id] = 0;
    memcpy(&obj->value[id], &value, sizeof value);
}

/* ---- element types ---------------------------------------------------------------------- */

enum class element { f32, bf16, f16 };

bool element_of(int32_t cuda_type, element *out)
{
    switch (cuda_type) {
    case CUDA_R_32F: *out = element::f32; return true;
    case CUDA_R_16BF: *out = element::bf16; return true;
    case CUDA_R_16F: *out = element::f16; return true;
    default: return false;
    }
}

const char *element_name(element t)
{
    return t == element::f32 ? "CUDA_R_32F" : t == element::bf16 ? "CUDA_R_16BF" : "CUDA_R_16F";
}

int64_t element_bytes(element t)
{
    return t == element::f32 ? 4 : 2;
}

float load(element t, const char *base, int64_t index)
{
    switch (t) {
    case element::f32: {
        float v;
        memcpy(&v, base + index * 4, 4);
        return v;
    }
    case element::bf16: {
        uint16_t h;
        memcpy(&h, base + index * 2, 2);
        return gb_f32_from_bf16(h);
    }
    case element::f16: {
        uint16_t h;
        memcpy(&h, base + index * 2, 2);
        return gb_f32_from_f16(h);
    }
    }
    return 0.0f;
}

void store(element t, char *base, int64_t index, float v)
{
    switch (t) {
    case element::f32:
        memcpy(base + index * 4, &v, 4);
        return;
    case element::bf16: {
        uint16_t h = gb_bf16_from_f32(v);
        memcpy(base + index * 2, &h, 2);
        return;
    }
    case element::f16: {
        uint16_t h = gb_f16_from_f32(v);
        memcpy(base + index * 2, &h, 2);
        return;
    }
    }
}

/* How the FAST compute types narrow f32 inputs before multiplying them. */
enum class input_rounding { none, tf32, bf16, f16 };

/* TF32 keeps f32's exponent and the top 10 mantissa bits: round to nearest even at the
 * 13 dropped bits; infinities and NaN pass unchanged. */
float round_to_tf32(float x)
{
    uint32_t bits = gb_f32_bits(x);
    if ((bits & 0x7fffffffu) >= 0x7f800000u)
        return x;
    bits += 0x0fffu + ((bits >> 13) & 1u);
    return gb_f32_from_bits(bits & ~0x1fffu);
}

float round_input(input_rounding r, float x)
{
    switch (r) {
    case input_rounding::none: return x;
    case input_rounding::tf32: return round_to_tf32(x);
    case input_rounding::bf16: return gb_f32_from_bf16(gb_bf16_from_f32(x));
    case input_rounding::f16: return gb_f32_from_f16(gb_f16_from_f32(x));
    }
    return x;
}

/* ---- one matmul, as copied at call time ------------------------------------------------- */

/* One operand as stored. */
struct matrix {
    const char *name;
    element type;
    bool row_order;
    int64_t rows, cols, ld, stride;   // stride: elements between batch entries
    char *data;
};

int64_t offset_of(const matrix &mat, int64_t row, int64_t col)
{
    return mat.row_order ? row * mat.ld + col : row + col * mat.ld;
}

/* What an epilogue adds to the product. */
struct epilogue_parts {
    bool bias = false;      // + bias[row]
    bool relu = false;
    bool gelu = false;
    bool aux_out = false;   // aux = the activation's input
    bool dgelu = false;     // * gelu'(aux)
    bool bgrad_a = false;   // bias = row sums of op(A)
    bool bgrad_b = false;   // bias = column sums of op(B)
    bool bgrad_d = false;   // bias = row sums of D
    bool uses_vector() const { return bias || bgrad_a || bgrad_b || bgrad_d; }
    bool uses_aux() const { return aux_out || dgelu; }
    bool writes_vector() const { return bgrad_a || bgrad_b || bgrad_d; }
};

bool epilogue_parts_of(uint32_t epilogue, epilogue_parts *out)
{
    epilogue_parts p;
    switch (epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT: break;
    case CUBLASLT_EPILOGUE_RELU: p.relu = true; break;
    case CUBLASLT_EPILOGUE_BIAS: p.bias = true; break;
    case CUBLASLT_EPILOGUE_RELU_BIAS: p.bias = p.relu = true; break;
    case CUBLASLT_EPILOGUE_GELU: p.gelu = true; break;
    case CUBLASLT_EPILOGUE_GELU_AUX: p.gelu = p.aux_out = true; break;
    case CUBLASLT_EPILOGUE_GELU_BIAS: p.bias = p.gelu = true; break;
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: p.bias = p.gelu = p.aux_out = true; break;
    case CUBLASLT_EPILOGUE_DGELU: p.dgelu = true; break;
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: p.dgelu = p.bgrad_d = true; break;
    case CUBLASLT_EPILOGUE_BGRADA: p.bgrad_a = true; break;
    case CUBLASLT_EPILOGUE_BGRADB: p.bgrad_b = true; break;
    default: return false;
    }
    *out = p;
    return true;
}

/* Everything cublasLtMatmul computes from, by value. */
struct matmul_call {
    int64_t m = 0, n = 0, k = 0, batch = 1;
    matrix a{}, b{}, c{}, d{};
    bool trans_a = false, trans_b = false;
    input_rounding rounding = input_rounding::none;
    epilogue_parts epilogue;
    matrix vec{};            // bias or bias gradient: one column of vec_len, batch stride
    matrix aux{};            // column-major, D's shape
    bool scalars_on_device = false;
    float alpha = 1.0f, beta = 0.0f;            // host pointer mode
    const char *alpha_ptr = nullptr, *beta_ptr = nullptr;   // device pointer mode
};

/* ---- the counting mode's line ----------------------------------------------------------- */

const char *short_name(element t)
{
    return t == element::f32 ? "f32" : t == element::bf16 ? "bf16" : "f16";
}

/* cuBLASLt's name of the epilogue, less CUBLASLT_EPILOGUE_. */
std::string epilogue_name(const epilogue_parts &e)
{
    if (e.dgelu)
        return e.bgrad_d ? "DGELU_BGRAD" : "DGELU";
    if (e.bgrad_a || e.bgrad_b)
        return e.bgrad_a ? "BGRADA" : "BGRADB";
    std::string name = e.gelu ? "GELU" : e.relu ? "RELU" : "";
    if (e.aux_out)
        name += "_AUX";
    if (e.bias)
        name += name.empty() ? "BIAS" : "_BIAS";
    return name.empty() ? "DEFAULT" : name;
}

const char *compute_name(input_rounding r)
{
    switch (r) {
    case input_rounding::none: return "32F";
    case input_rounding::tf32: return "32F_FAST_TF32";
    case input_rounding::bf16: return "32F_FAST_16BF";
    case input_rounding::f16: return "32F_FAST_16F";
    }
    return "?";
}

std::string counted_fields(const matmul_call &c)
{
    char out[512];
    snprintf(out, sizeof out, "\"m\":%" PRId64 ",\"n\":%" PRId64 ",\"k\":%" PRId64
             ",\"batch\":%" PRId64 ",\"a_type\":\"%s\",\"b_type\":\"%s\",\"c_type\":\"%s\","
             "\"d_type\":\"%s\",\"compute\":\"%s\",\"trans_a\":%s,\"trans_b\":%s,"
             "\"epilogue\":\"%s\"", c.m, c.n, c.k, c.batch, short_name(c.a.type),
             short_name(c.b.type), short_name(c.c.type), short_name(c.d.type),
             compute_name(c.rounding), c.trans_a ? "true" : "false", c.trans_b ? "true" : "false",
             epilogue_name(c.epilogue).c_str());
    return out;
}

/* ---- the computation -------------------------------------------------------------------- */

/* The block of D one call of multiply_tile() sums: kTileRows x kTileCols accumulators of
 * GCC vector type, as many as the vector registers hold (16 of them without AVX-512), so
 * that they stay in registers whatever the optimisation flags. Lanes are independent, so
 * the bits do not depend on the vector width. */
#ifdef __AVX__
constexpr int64_t kLanes = 8;
#else
constexpr int64_t kLanes = 4;
#endif
typedef float lane_vector __attribute__((vector_size(kLanes * sizeof(float))));
constexpr int64_t kTileVectors = 3;
constexpr int64_t kTileRows = kTileVectors * kLanes;
constexpr int64_t kTileCols = 4;

int64_t round_up(int64_t x, int64_t to)
{
    return (x + to - 1) / to * to;
}

/* An operand converted to f32 once, in the order multiply_tile() reads it: for each tile
 * of `tile` values of x, its k rows of `tile` floats one after the other, where row p holds
 * op(A)(x, p) for A and op(B)(p, x) for B, zero-padded to whole tiles. One panel per batch
 * entry, or one in all for a broadcast operand (batch stride 0). */
struct panel_set {
    std::vector<float> data;
    int64_t tile = 0;       // values of x per tile
    int64_t tiles = 0;      // tiles along x
    int64_t depth = 0;      // k
    int64_t count = 0;      // panels held
    const float *slice(int64_t batch, int64_t t) const
    {
        return data.data() + (((count == 1 ? 0 : batch) * tiles + t) * depth) * tile;
    }
    float at(int64_t batch, int64_t x, int64_t p) const
    {
        return slice(batch, x / tile)[p * tile + x % tile];
    }
};

/* Element (x, p) of the panel is src(p, x) when x runs along src's columns, else src(x, p);
 * inputs are rounded here as the compute type says. */
void pack_operand(const matrix &src, bool x_along_columns, int64_t len, int64_t k,
                  int64_t tile, int64_t batch, input_rounding rounding, panel_set *out)
{
    out->tile = tile;
    out->tiles = round_up(len > 0 ? len : 1, tile) / tile;
    out->depth = k;
    out->count = src.stride == 0 || batch == 1 ? 1 : batch;
    out->data.assign((size_t)(out->count * out->tiles * tile * k), 0.0f);
    const int64_t slices = out->count * out->tiles, esz = element_bytes(src.type);
    float *dst = out->data.data();
#pragma omp parallel for schedule(static) if (slices * tile * k > 65536)
    for (int64_t s = 0; s < slices; s++) {
        const int64_t b = s / out->tiles, x0 = s % out->tiles * tile;
        const char *base = src.data + b * src.stride * esz;
        float *slice = dst + s * k * tile;
        const int64_t x_end = x0 + tile < len ? x0 + tile : len;
        auto copy = [&](int64_t x, int64_t p) {
            int64_t at = x_along_columns ? offset_of(src, p, x) : offset_of(src, x, p);
            slice[p * tile + x - x0] = round_input(rounding, load(src.type, base, at));
        };
        if (x_along_columns == src.row_order) {   // x is the contiguous index: read along it
            for (int64_t p = 0; p < k; p++)
                for (int64_t x = x0; x < x_end; x++)
                    copy(x, p);
        } else {
            for (int64_t x = x0; x < x_end; x++)
                for (int64_t p = 0; p < k; p++)
                    copy(x, p);
        }
    }
}

/* op(A)(x, p) is A(x, p), or A(p, x) transposed. */
void pack_a(const matmul_call &c, panel_set *out)
{
    pack_operand(c.a, c.trans_a, c.m, c.k, kTileRows, c.batch, c.rounding, out);
}

/* op(B)(p, x) is B(p, x), or B(x, p) transposed. */
void pack_b(const matmul_call &c, panel_set *out)
{
    pack_operand(c.b, !c.trans_b, c.n, c.k, kTileCols, c.batch, c.rounding, out);
}

/* Sums over p in increasing order, the same order whichever thread runs the tile. */
void multiply_tile(const float *a, const float *b, int64_t k, float out[kTileCols][kTileRows])
{
    lane_vector acc[kTileCols][kTileVectors] = {};
    for (int64_t p = 0; p < k; p++) {
        lane_vector ap[kTileVectors];
        memcpy(ap, a + p * kTileRows, sizeof ap);
        const float *bp = b + p * kTileCols;
#pragma GCC unroll 8
        for (int64_t j = 0; j < kTileCols; j++) {
            const float bj = bp[j];
#pragma GCC unroll 8
            for (int64_t v = 0; v < kTileVectors; v++)
                acc[j][v] += ap[v] * bj;
        }
    }
    memcpy(out, acc, sizeof acc);
}

/* The operand pointers of one batch entry. */
struct batch_entry {
    const char *c;
    char *d;
    char *vec;
    char *aux;
};

batch_entry entry_of(const matmul_call &c, int64_t b)
{
    auto at = [b](const matrix &mat) {
        return mat.data ? mat.data + b * mat.stride * element_bytes(mat.type) : nullptr;
    };
    return batch_entry{at(c.c), at(c.d), at(c.vec), at(c.aux)};
}

/* cuBLASLt's GELU, the tanh form 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
 * and its derivative 0.5 (1 + t) + 0.5 x (1 - t^2) u', t = tanh(u), in double with libm's
 * tanh, from their definitions. A GPU's cuBLASLt takes tanh from hardware good to about
 * 2^-11 (TF32's precision); so does this double (lt_tanh rounds it to 11 significant
 * bits), so a result that cuBLASLt's epilogue computed in place of device/cuda's f32
 * element-wise GELU shows against f32's tolerance, as it would on a GPU. */
constexpr double LT_GELU_SQRT_2_OVER_PI = 0.79788456080286535588;
constexpr double LT_GELU_CUBIC = 0.044715;

double lt_tanh(double u)
{
    int exponent;
    const double mantissa = std::frexp(std::tanh(u), &exponent);
    return std::ldexp(std::nearbyint(std::ldexp(mantissa, 11)), exponent - 11);
}

float lt_gelu(float x)
{
    const double t = lt_tanh(LT_GELU_SQRT_2_OVER_PI * (x + LT_GELU_CUBIC * x * x * x));
    return (float)(0.5 * x * (1.0 + t));
}

float lt_gelu_grad(float x)
{
    const double t = lt_tanh(LT_GELU_SQRT_2_OVER_PI * (x + LT_GELU_CUBIC * x * x * x));
    const double du = LT_GELU_SQRT_2_OVER_PI * (1.0 + 3.0 * LT_GELU_CUBIC * x * x);
    return (float)(0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du);
}

/* alpha sum + beta C + bias through the activation, into D (and aux). Returns D's value
 * before its rounding to D's type. */
float finish_element(const matmul_call &c, const batch_entry &e, float alpha, float beta,
                     float sum, int64_t i, int64_t j)
{
    float v = alpha * sum;
    if (beta != 0.0f)
        v = v + beta * load(c.c.type, e.c, offset_of(c.c, i, j));
    if (c.epilogue.bias)
        v = v + load(c.vec.type, e.vec, i);
    if (c.epilogue.aux_out)
        store(c.aux.type, e.aux, i + j * c.aux.ld, v);
    if (c.epilogue.gelu)
        v = lt_gelu(v);
    if (c.epilogue.relu)
        v = v > 0.0f ? v : 0.0f;
    if (c.epilogue.dgelu)
        v = v * lt_gelu_grad(load(c.aux.type, e.aux, i + j * c.aux.ld));
    store(c.d.type, e.d, offset_of(c.d, i, j), v);
    return v;
}

/* Bias gradients: each sum in a fixed order, one thread per element. */
void write_vector_sums(const matmul_call &c, const panel_set &a, const panel_set &b,
                       const std::vector<float> &d_values)
{
    const int64_t len = c.epilogue.bgrad_b ? c.n : c.m;
    for (int64_t bi = 0; bi < c.batch; bi++) {
        char *vec = entry_of(c, bi).vec;
        const float *dv = d_values.data() + (c.epilogue.bgrad_d ? bi * c.m * c.n : 0);
#pragma omp parallel for schedule(static) if (len * (c.k > c.n ? c.k : c.n) > 65536)
        for (int64_t x = 0; x < len; x++) {
            float sum = 0.0f;
            if (c.epilogue.bgrad_a)
                for (int64_t p = 0; p < c.k; p++)
                    sum += a.at(bi, x, p);
            else if (c.epilogue.bgrad_b)
                for (int64_t p = 0; p < c.k; p++)
                    sum += b.at(bi, x, p);
            else
                for (int64_t j = 0; j < c.n; j++)
                    sum += dv[x + j * c.m];
            store(c.vec.type, vec, x, sum);
        }
    }
}

/* Calls fn(p, bytes) for each column of `mat` (each row when row-ordered) in each batch
 * entry: the bytes the matrix is made of, its leading dimension's gaps left out. */
template <typename Fn> void for_each_line(const matrix &mat, int64_t batch, Fn fn)
{
    const int64_t esz = element_bytes(mat.type);
    const int64_t lines = mat.row_order ? mat.rows : mat.cols;
    const int64_t along = mat.row_order ? mat.cols : mat.rows;
    for (int64_t bi = 0; bi < batch; bi++)
        for (int64_t l = 0; l < lines; l++) {
            const int64_t first = bi * mat.stride + (mat.row_order ? offset_of(mat, l, 0)
                                                                    : offset_of(mat, 0, l));
            fn(mat.data + first * esz, (size_t)(along * esz));
        }
}

/* The emulator's initcheck, which sees none of this double's accesses: an input must have
 * been written (by a kernel, a copy, a memset or a library) before the matmul runs, and
 * the outputs count as written once it has. */
void check_written(const matrix &mat, int64_t batch)
{
    for_each_line(mat, batch, [&](const char *p, size_t bytes) {
        const size_t at = gb_emu::first_unwritten(p, bytes);
        if (at != SIZE_MAX)
            gb_emu::report("cublasLtMatmul reads %s (%" PRId64 " x %" PRId64 ", ld %" PRId64
                           ") at %p: byte %zu of the column or row at %p was never written "
                           "(a read of uninitialised device memory)", mat.name, mat.rows,
                           mat.cols, mat.ld, (const void *)mat.data, at, (const void *)p);
    });
}

void mark_written(const matrix &mat, int64_t batch)
{
    for_each_line(mat, batch,
                  [](char *p, size_t bytes) { gb_emu::mark_device_written(p, bytes); });
}

/* What the matmul reads, beta once it is known (C is read only when it is not 0). */
void check_inputs_written(const matmul_call &c, float beta)
{
    check_written(c.a, c.batch);
    check_written(c.b, c.batch);
    if (beta != 0.0f)
        check_written(c.c, c.batch);
    if (c.epilogue.bias)
        check_written(c.vec, c.batch);
    if (c.epilogue.dgelu)
        check_written(c.aux, c.batch);
}

void run_matmul(const matmul_call &c)
{
    float alpha = c.alpha, beta = c.beta;
    if (c.scalars_on_device) {
        if (gb_emu::first_unwritten(c.alpha_ptr, sizeof alpha) != SIZE_MAX ||
            gb_emu::first_unwritten(c.beta_ptr, sizeof beta) != SIZE_MAX)
            gb_emu::report("cublasLtMatmul reads alpha or beta from device memory never "
                           "written (a read of uninitialised device memory)");
        memcpy(&alpha, c.alpha_ptr, sizeof alpha);
        memcpy(&beta, c.beta_ptr, sizeof beta);
    }
    check_inputs_written(c, beta);
    panel_set a, b;
    pack_a(c, &a);
    pack_b(c, &b);
    std::vector<float> d_values;   // D before rounding, for DGELU_BGRAD's row sums
    if (c.epilogue.bgrad_d)
        d_values.resize((size_t)(c.batch * c.m * c.n));

    const int64_t tiles_m = a.tiles, tiles_n = b.tiles;
    const int64_t tiles = c.batch * tiles_m * tiles_n;
    const bool keep_d = c.epilogue.bgrad_d;
#pragma omp parallel for schedule(static) if (c.batch * c.m * c.n * (c.k + 1) > 32768)
    for (int64_t t = 0; t < tiles; t++) {
        const int64_t bi = t / (tiles_m * tiles_n), rest = t % (tiles_m * tiles_n);
        /* j fastest: consecutive tiles share A's slice, the larger one, while it is cached */
        const int64_t i0 = rest / tiles_n * kTileRows, j0 = rest % tiles_n * kTileCols;
        float acc[kTileCols][kTileRows];
        multiply_tile(a.slice(bi, i0 / kTileRows), b.slice(bi, j0 / kTileCols), c.k, acc);
        const batch_entry e = entry_of(c, bi);
        for (int64_t j = j0; j < j0 + kTileCols && j < c.n; j++)
            for (int64_t i = i0; i < i0 + kTileRows && i < c.m; i++) {
                float v = finish_element(c, e, alpha, beta, acc[j - j0][i - i0], i, j);
                if (keep_d)
                    d_values[(size_t)(bi * c.m * c.n + i + j * c.m)] = v;
            }
    }
    if (c.epilogue.writes_vector())
        write_vector_sums(c, a, b, d_values);
    mark_written(c.d, c.batch);
    if (c.epilogue.aux_out)
        mark_written(c.aux, c.batch);
    if (c.epilogue.writes_vector())
        mark_written(c.vec, c.batch);
}

/* ---- validation ----------------------------------------------------------------------- */

constexpr uint32_t kDefaultAlignment = 256;   // what cuBLASLt assumes unless told

/* The algorithm the heuristic hands out: the alignments it was chosen for. */
struct algo_record {
    uint64_t magic;
    uint32_t align_a, align_b, align_c, align_d, align_bias, align_aux;
};
static_assert(sizeof(algo_record) <= sizeof(cublasLtMatmulAlgo_t), "algo record too large");
constexpr uint64_t kAlgoMagic = 0x6762656d754c7431ull;   // "gbemuLt1"

/* The largest power of two (at most 256) dividing the address and, for batches, the
 * batch stride in bytes: what every batch entry's pointer is aligned to. */
uint32_t alignment_of(const void *p, int64_t stride_bytes)
{
    uint64_t bits = (uint64_t)(uintptr_t)p | (uint64_t)stride_bytes | kDefaultAlignment;
    return (uint32_t)(bits & (~bits + 1));
}

verdict read_layout(const char *name, cublasLtMatrixLayout_t handle, matrix *out,
                    int32_t *batch_count)
{
    const lt_object *obj = find_object(handle, kind::layout);
    if (!obj)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%sdesc is not a live matrix layout", name);
    matrix mat{};
    mat.name = name;
    int32_t type = (int32_t)attribute<uint32_t>(obj, CUBLASLT_MATRIX_LAYOUT_TYPE);
    if (!element_of(type, &mat.type))
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s's data type %d is not CUDA_R_32F, "
                      "CUDA_R_16BF or CUDA_R_16F", name, (int)type);
    int32_t order = attribute<int32_t>(obj, CUBLASLT_MATRIX_LAYOUT_ORDER);
    if (order != CUBLASLT_ORDER_COL && order != CUBLASLT_ORDER_ROW)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s's order %d is neither "
                      "CUBLASLT_ORDER_COL nor CUBLASLT_ORDER_ROW", name, (int)order);
    if (attribute<int64_t>(obj, CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET) != 0)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: planar complex layouts", name);
    if (attribute<uint32_t>(obj, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE) != CUBLASLT_BATCH_MODE_STRIDED)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: pointer-array batches", name);
    mat.row_order = order == CUBLASLT_ORDER_ROW;
    uint64_t rows = attribute<uint64_t>(obj, CUBLASLT_MATRIX_LAYOUT_ROWS);
    uint64_t cols = attribute<uint64_t>(obj, CUBLASLT_MATRIX_LAYOUT_COLS);
    if (rows > INT32_MAX || cols > INT32_MAX)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s is %" PRIu64 " x %" PRIu64 ": more "
                      "than 2^31 - 1 rows or columns", name, rows, cols);
    mat.rows = (int64_t)rows;
    mat.cols = (int64_t)cols;
    mat.ld = attribute<int64_t>(obj, CUBLASLT_MATRIX_LAYOUT_LD);
    const int64_t min_ld = mat.row_order ? mat.cols : mat.rows;
    if (mat.ld < (min_ld > 1 ? min_ld : 1) || mat.ld > (int64_t)1 << 40)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s's leading dimension %" PRId64 " is "
                      "below its %s (%" PRId64 ", %s order)", name, mat.ld,
                      mat.row_order ? "columns" : "rows", min_ld,
                      mat.row_order ? "row" : "column");
    *batch_count = attribute<int32_t>(obj, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT);
    if (*batch_count < 1)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s's batch count is %d", name,
                      (int)*batch_count);
    mat.stride = attribute<int64_t>(obj, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET);
    if (mat.stride < 0 || mat.stride > (int64_t)1 << 48)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s's batch stride %" PRId64
                      " is negative or huge", name, mat.stride);
    *out = mat;
    return kOk;
}

/* The compute type's rounding of inputs, and whether it takes these A/B and C/D types. */
verdict read_types(const lt_object *desc, const matmul_call &c, input_rounding *rounding)
{
    const int32_t compute = attribute<int32_t>(desc, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE);
    const int32_t scale = attribute<int32_t>(desc, CUBLASLT_MATMUL_DESC_SCALE_TYPE);
    if (scale != CUDA_R_32F)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "scale type %d is not CUDA_R_32F",
                      (int)scale);
    if (c.a.type != c.b.type)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "A is %s but B is %s",
                      element_name(c.a.type), element_name(c.b.type));
    if (c.c.type != c.d.type)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "C is %s but D is %s",
                      element_name(c.c.type), element_name(c.d.type));
    const bool f32_ab = c.a.type == element::f32;
    switch (compute) {
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
        *rounding = input_rounding::none;
        if (f32_ab && c.d.type != element::f32)
            return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "f32 A and B with a %s D",
                          element_name(c.d.type));
        return kOk;
    case CUBLAS_COMPUTE_32F_FAST_TF32:
        *rounding = input_rounding::tf32;
        break;
    case CUBLAS_COMPUTE_32F_FAST_16BF:
        *rounding = input_rounding::bf16;
        break;
    case CUBLAS_COMPUTE_32F_FAST_16F:
        *rounding = input_rounding::f16;
        break;
    default:
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "compute type %d (the double has "
                      "CUBLAS_COMPUTE_32F[_PEDANTIC|_FAST_TF32|_FAST_16BF|_FAST_16F])",
                      (int)compute);
    }
    if (!f32_ab || c.d.type != element::f32)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "a FAST compute type takes f32 A, B, C "
                      "and D, not %s and %s", element_name(c.a.type), element_name(c.d.type));
    return kOk;
}

/* Attributes the double accepts only at their defaults (FP8 scaling and friends). */
verdict check_defaults(const lt_object *desc)
{
    static const struct { int id; const char *name; } kMustBeZero[] = {
        {CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE, "ALPHA_VECTOR_BATCH_STRIDE"},
        {CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, "A_SCALE_POINTER"},
        {CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, "B_SCALE_POINTER"},
        {CUBLASLT_MATMUL_DESC_C_SCALE_POINTER, "C_SCALE_POINTER"},
        {CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, "D_SCALE_POINTER"},
        {CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, "AMAX_D_POINTER"},
        {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER, "EPILOGUE_AUX_SCALE_POINTER"},
        {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER, "EPILOGUE_AUX_AMAX_POINTER"},
        {CUBLASLT_MATMUL_DESC_A_SCALE_MODE, "A_SCALE_MODE"},
        {CUBLASLT_MATMUL_DESC_B_SCALE_MODE, "B_SCALE_MODE"},
        {CUBLASLT_MATMUL_DESC_C_SCALE_MODE, "C_SCALE_MODE"},
        {CUBLASLT_MATMUL_DESC_D_SCALE_MODE, "D_SCALE_MODE"},
        {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE, "EPILOGUE_AUX_SCALE_MODE"},
        {CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER, "D_OUT_SCALE_POINTER"},
        {CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE, "D_OUT_SCALE_MODE"},
        {CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR, "EMULATION_DESCRIPTOR"},
    };
    for (const auto &attr : kMustBeZero)
        if (desc->value[attr.id] != 0)
            return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "CUBLASLT_MATMUL_DESC_%s is set "
                          "(the double has no FP8 scaling or emulation)", attr.name);
    if (attribute<int32_t>(desc, CUBLASLT_MATMUL_DESC_TRANSC) != CUBLAS_OP_N)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "TRANSC other than CUBLAS_OP_N");
    if (attribute<int32_t>(desc, CUBLASLT_MATMUL_DESC_FILL_MODE) != CUBLAS_FILL_MODE_FULL)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "FILL_MODE other than CUBLAS_FILL_MODE_FULL");
    return kOk;
}

verdict read_transpose(const lt_object *desc, int id, const char *name, bool *out)
{
    const int32_t op = attribute<int32_t>(desc, id);
    if (op != CUBLAS_OP_N && op != CUBLAS_OP_T && op != CUBLAS_OP_C)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s = %d", name, (int)op);
    *out = op != CUBLAS_OP_N;   // CUBLAS_OP_C is CUBLAS_OP_T for real types
    return kOk;
}

/* D's shape against op(A), op(B) and C, and the batch counts. */
verdict check_shapes(const matmul_call &c, const int32_t counts[4])
{
    const int64_t a_rows = c.trans_a ? c.a.cols : c.a.rows, a_cols = c.trans_a ? c.a.rows : c.a.cols;
    const int64_t b_rows = c.trans_b ? c.b.cols : c.b.rows, b_cols = c.trans_b ? c.b.rows : c.b.cols;
    if (a_rows != c.d.rows || b_cols != c.d.cols || a_cols != b_rows)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "op(A) %" PRId64 " x %" PRId64 " times "
                      "op(B) %" PRId64 " x %" PRId64 " does not make D's %" PRId64 " x %" PRId64,
                      a_rows, a_cols, b_rows, b_cols, c.d.rows, c.d.cols);
    if (c.c.rows != c.d.rows || c.c.cols != c.d.cols)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "C is %" PRId64 " x %" PRId64 " but D is "
                      "%" PRId64 " x %" PRId64, c.c.rows, c.c.cols, c.d.rows, c.d.cols);
    if (c.c.row_order != c.d.row_order)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "C and D in different orders");
    if (counts[0] != counts[3] || counts[1] != counts[3] || counts[2] != counts[3])
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "batch counts differ: A %d, B %d, C %d, "
                      "D %d", (int)counts[0], (int)counts[1], (int)counts[2], (int)counts[3]);
    if (counts[3] > 1 && c.d.stride == 0 && c.d.rows > 0 && c.d.cols > 0)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "D has a batch of %d with stride 0: the "
                      "entries would overwrite each other", (int)counts[3]);
    return kOk;
}

/* The bias (or bias gradient) and aux matrix the epilogue needs. */
verdict read_epilogue(const lt_object *desc, matmul_call *c)
{
    const uint32_t epilogue = attribute<uint32_t>(desc, CUBLASLT_MATMUL_DESC_EPILOGUE);
    if (!epilogue_parts_of(epilogue, &c->epilogue))
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "epilogue %u (the double has DEFAULT, "
                      "RELU[_BIAS], BIAS, GELU[_AUX][_BIAS], DGELU[_BGRAD], BGRADA, BGRADB)",
                      (unsigned)epilogue);
    const epilogue_parts &ep = c->epilogue;
    if ((ep.uses_vector() || ep.uses_aux()) && c->d.row_order)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "bias and aux epilogues need a "
                      "column-major D (CUBLASLT_ORDER_COL)");
    if (ep.uses_vector()) {
        matrix &vec = c->vec;
        vec.name = ep.writes_vector() ? "the bias gradient" : "the bias";
        const int32_t type = attribute<int32_t>(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE);
        vec.type = c->d.type;
        if (type != -1 && (!element_of(type, &vec.type) || vec.type != c->d.type))
            return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "BIAS_DATA_TYPE %d is not D's type "
                          "(%s)", (int)type, element_name(c->d.type));
        vec.rows = ep.bgrad_b ? c->n : c->m;
        vec.cols = 1;
        vec.ld = vec.rows > 0 ? vec.rows : 1;
        vec.stride = attribute<int64_t>(desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE);
        vec.data = attribute<char *>(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER);
        if (vec.stride < 0)
            return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "negative BIAS_BATCH_STRIDE");
        if (ep.writes_vector() && c->batch > 1 && vec.stride == 0 && vec.rows > 0)
            return refuse(CUBLAS_STATUS_INVALID_VALUE, "a bias gradient over a batch of "
                          "%" PRId64 " with BIAS_BATCH_STRIDE 0 would overwrite itself",
                          c->batch);
    }
    if (ep.uses_aux()) {
        matrix &aux = c->aux;
        aux.name = "the aux matrix";
        const int32_t type = attribute<int32_t>(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE);
        aux.type = c->d.type;
        if (type != -1 && (!element_of(type, &aux.type) || aux.type != c->d.type))
            return refuse(CUBLAS_STATUS_INVALID_VALUE, "EPILOGUE_AUX_DATA_TYPE %d is not "
                          "D's type (%s)", (int)type, element_name(c->d.type));
        aux.rows = c->m;
        aux.cols = c->n;
        aux.ld = attribute<int64_t>(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD);
        aux.stride = attribute<int64_t>(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE);
        aux.data = attribute<char *>(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER);
        if (aux.ld < (c->m > 1 ? c->m : 1))
            return refuse(CUBLAS_STATUS_INVALID_VALUE, "EPILOGUE_AUX_LD %" PRId64 " is below "
                          "D's %" PRId64 " rows", aux.ld, c->m);
        /* cuBLASLt documents both as "must be divisible by 8": a broken requirement of
         * the call (INVALID_VALUE), not a case an algorithm lacks (NOT_SUPPORTED, from
         * which a caller would fall back unseen). */
        if (aux.ld % 8 != 0 || aux.stride % 8 != 0 || aux.stride < 0)
            return refuse(CUBLAS_STATUS_INVALID_VALUE, "EPILOGUE_AUX_LD (%" PRId64 ") and "
                          "EPILOGUE_AUX_BATCH_STRIDE (%" PRId64 ") must be non-negative "
                          "multiples of 8", aux.ld, aux.stride);
        if (ep.aux_out && c->batch > 1 && aux.stride == 0)
            return refuse(CUBLAS_STATUS_INVALID_VALUE, "GELU_AUX over a batch of %" PRId64
                          " with EPILOGUE_AUX_BATCH_STRIDE 0 would overwrite aux", c->batch);
    }
    return kOk;
}

/* Descriptor and layouts into `c`: everything but the pointers of the call. */
verdict read_problem(cublasLtMatmulDesc_t desc_handle, cublasLtMatrixLayout_t layouts[4],
                     matmul_call *c)
{
    const lt_object *desc = find_object(desc_handle, kind::matmul_desc);
    if (!desc)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "computeDesc is not a live matmul "
                      "descriptor");
    static const char *const kNames[4] = {"A", "B", "C", "D"};
    matrix *mats[4] = {&c->a, &c->b, &c->c, &c->d};
    int32_t counts[4];
    for (int i = 0; i < 4; i++) {
        verdict v = read_layout(kNames[i], layouts[i], mats[i], &counts[i]);
        if (v.failed())
            return v;
    }
    verdict v = read_types(desc, *c, &c->rounding);
    if (!v.failed())
        v = check_defaults(desc);
    if (!v.failed())
        v = read_transpose(desc, CUBLASLT_MATMUL_DESC_TRANSA, "TRANSA", &c->trans_a);
    if (!v.failed())
        v = read_transpose(desc, CUBLASLT_MATMUL_DESC_TRANSB, "TRANSB", &c->trans_b);
    if (v.failed())
        return v;
    c->m = c->d.rows;
    c->n = c->d.cols;
    c->k = c->trans_a ? c->a.rows : c->a.cols;
    c->batch = counts[3];
    if ((v = check_shapes(*c, counts)).failed())
        return v;
    if (c->batch == 1)
        c->a.stride = c->b.stride = c->c.stride = c->d.stride = 0;   // unused, as documented
    const int32_t mode = attribute<int32_t>(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE);
    if (mode != CUBLASLT_POINTER_MODE_HOST && mode != CUBLASLT_POINTER_MODE_DEVICE)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "pointer mode %d (the double has HOST "
                      "and DEVICE)", (int)mode);
    c->scalars_on_device = mode == CUBLASLT_POINTER_MODE_DEVICE;
    v = read_epilogue(desc, c);
    if (!v.failed() && c->batch == 1)
        c->vec.stride = c->aux.stride = 0;
    return v;
}

/* ---- checks of the call's pointers -------------------------------------------------------- */

/* Bytes from a matrix's first element to past its last, over all batch entries. */
int64_t extent_bytes(const matrix &mat, int64_t batch)
{
    if (mat.rows == 0 || mat.cols == 0)
        return 0;
    const int64_t last = offset_of(mat, mat.rows - 1, mat.cols - 1) + (batch - 1) * mat.stride;
    return (last + 1) * element_bytes(mat.type);
}

verdict check_device_memory(const char *name, const void *p, int64_t bytes)
{
    if (bytes == 0)
        return kOk;
    if (!p)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s is NULL", name);
    if (gb_emu::find_allocation(p, (size_t)bytes))
        return kOk;
    const gb_emu::allocation *holder = gb_emu::find_allocation(p, 1);
    if (holder)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s at %p needs %" PRId64 " bytes but "
                      "allocation #%u (%zu bytes at %p) holds only %zu from there", name, p,
                      bytes, holder->id, holder->bytes, (const void *)holder->base,
                      holder->bytes - (size_t)((const char *)p - holder->base));
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s at %p is not device memory (%" PRId64
                  " bytes from cudaMalloc were expected; a host pointer?)", name, p, bytes);
}

verdict check_matrix(const matrix &mat, int64_t batch, uint32_t promised_alignment)
{
    verdict v = check_device_memory(mat.name, mat.data, extent_bytes(mat, batch));
    if (v.failed() || !mat.data)
        return v;
    const int64_t esz = element_bytes(mat.type);
    const uint32_t align = alignment_of(mat.data, batch > 1 ? mat.stride * esz : 0);
    if (align < esz)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s at %p (batch stride %" PRId64 ") is "
                      "not aligned to its %" PRId64 "-byte elements", mat.name,
                      (const void *)mat.data, mat.stride, esz);
    if (align < promised_alignment)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s at %p (batch stride %" PRId64 ") is "
                      "%u-byte aligned but the algorithm was chosen for %u-byte alignment "
                      "(tell the heuristic: CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES, or "
                      "the descriptor's bias/aux pointer when asking it)", mat.name,
                      (const void *)mat.data, mat.stride, align, promised_alignment);
    return kOk;
}

verdict check_scalar(const char *name, const void *p, bool on_device)
{
    if (!p)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s is NULL", name);
    const bool is_device = gb_emu::find_allocation(p, sizeof(float)) != nullptr;
    if (on_device && !is_device)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s at %p is not device memory but the "
                      "pointer mode is CUBLASLT_POINTER_MODE_DEVICE", name, p);
    if (!on_device && is_device)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s at %p is device memory but the "
                      "pointer mode is CUBLASLT_POINTER_MODE_HOST", name, p);
    return kOk;
}

verdict read_algo(const cublasLtMatmulAlgo_t *algo, algo_record *out)
{
    if (!algo) {   // cuBLASLt then picks one itself, for the natural alignments
        *out = algo_record{kAlgoMagic, 1, 1, 1, 1, 1, 1};
        return kOk;
    }
    memcpy(out, algo->data, sizeof *out);
    if (out->magic != kAlgoMagic)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "algo did not come from "
                      "cublasLtMatmulAlgoGetHeuristic");
    return kOk;
}

verdict check_workspace(const void *workspace, size_t bytes)
{
    if (!workspace && bytes > 0)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "workspace is NULL but "
                      "workspaceSizeInBytes is %zu", bytes);
    if (!workspace)
        return kOk;
    if ((uintptr_t)workspace % 256 != 0)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "workspace %p is not 256-byte aligned",
                      workspace);
    return check_device_memory("workspace", workspace, (int64_t)(bytes > 0 ? bytes : 1));
}

/* The pointers of a call: present, device memory, large and aligned enough. */
verdict check_pointers(const matmul_call &c, const algo_record &algo, bool c_is_read)
{
    const int64_t batch = c.batch;
    verdict v = check_matrix(c.a, batch, algo.align_a);
    if (!v.failed())
        v = check_matrix(c.b, batch, algo.align_b);
    if (!v.failed() && c_is_read)
        v = check_matrix(c.c, batch, algo.align_c);
    if (!v.failed())
        v = check_matrix(c.d, batch, algo.align_d);
    if (!v.failed() && c.epilogue.uses_vector())
        v = check_matrix(c.vec, batch, algo.align_bias);
    if (!v.failed() && c.epilogue.uses_aux())
        v = check_matrix(c.aux, batch, algo.align_aux);
    if (v.failed())
        return v;
    if (c_is_read && c.c.data == c.d.data && (c.c.ld != c.d.ld || c.c.stride != c.d.stride))
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "C == D in place with different layouts "
                      "(ld %" PRId64 " / %" PRId64 ", batch stride %" PRId64 " / %" PRId64 ")",
                      c.c.ld, c.d.ld, c.c.stride, c.d.stride);
    return kOk;
}

/* The alignment preferences: a power of two, and no less than the element. */
verdict read_alignment(const lt_object *pref, int id, const char *name, element type,
                       uint32_t *out)
{
    *out = pref ? attribute<uint32_t>(pref, id) : kDefaultAlignment;
    if (*out == 0 || (*out & (*out - 1)) != 0)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "MIN_ALIGNMENT_%s_BYTES = %u is not a "
                      "power of two", name, *out);
    if (*out < (uint32_t)element_bytes(type))
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "no algorithm for %s aligned to only "
                      "%u bytes (its elements are %s)", name, *out, element_name(type));
    return kOk;
}

/* The pointer the descriptor holds, as the heuristic sees it: NULL counts as aligned. */
verdict pointer_alignment(const matrix &mat, int64_t batch, const char *name, uint32_t *out)
{
    *out = alignment_of(mat.data, batch > 1 ? mat.stride * element_bytes(mat.type) : 0);
    if (mat.data && *out < (uint32_t)element_bytes(mat.type))
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "no algorithm for a %s pointer %p that is "
                      "not aligned to its elements", name, (const void *)mat.data);
    return kOk;
}

verdict choose_algo(const matmul_call &c, const lt_object *pref, algo_record *out)
{
    algo_record r{kAlgoMagic, 0, 0, 0, 0, kDefaultAlignment, kDefaultAlignment};
    if (pref && attribute<uint32_t>(pref, CUBLASLT_MATMUL_PREF_SEARCH_MODE) != CUBLASLT_SEARCH_BEST_FIT)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "search modes other than "
                      "CUBLASLT_SEARCH_BEST_FIT");
    verdict v = read_alignment(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, "A", c.a.type,
                               &r.align_a);
    if (!v.failed())
        v = read_alignment(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, "B", c.b.type,
                           &r.align_b);
    if (!v.failed())
        v = read_alignment(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, "C", c.c.type,
                           &r.align_c);
    if (!v.failed())
        v = read_alignment(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, "D", c.d.type,
                           &r.align_d);
    if (!v.failed() && c.epilogue.uses_vector())
        v = pointer_alignment(c.vec, c.batch, "bias", &r.align_bias);
    if (!v.failed() && c.epilogue.uses_aux())
        v = pointer_alignment(c.aux, c.batch, "aux", &r.align_aux);
    *out = r;
    return v;
}

/* cublasLtMatmul's checks; on success `call` holds everything the computation needs. */
verdict prepare_matmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha,
                       const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                       cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
                       cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                       const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspace_bytes,
                       matmul_call *call)
{
    if (!find_object(handle, kind::handle))
        return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "lightHandle is not a live "
                      "cublasLtCreate handle");
    cublasLtMatrixLayout_t layouts[4] = {Adesc, Bdesc, Cdesc, Ddesc};
    matmul_call c;
    verdict v = read_problem(desc, layouts, &c);
    if (v.failed())
        return v;
    algo_record record;
    if ((v = read_algo(algo, &record)).failed() ||
        (v = check_scalar("alpha", alpha, c.scalars_on_device)).failed() ||
        (v = check_scalar("beta", beta, c.scalars_on_device)).failed())
        return v;
    if (c.scalars_on_device) {
        c.alpha_ptr = static_cast<const char *>(alpha);
        c.beta_ptr = static_cast<const char *>(beta);
    } else {
        memcpy(&c.alpha, alpha, sizeof c.alpha);   // host mode: read at call time
        memcpy(&c.beta, beta, sizeof c.beta);
    }
    c.a.data = static_cast<char *>(const_cast<void *>(A));
    c.b.data = static_cast<char *>(const_cast<void *>(B));
    c.c.data = static_cast<char *>(const_cast<void *>(C));
    c.d.data = static_cast<char *>(D);
    const bool c_is_read = c.scalars_on_device || c.beta != 0.0f || C != nullptr;
    if ((v = check_pointers(c, record, c_is_read)).failed() ||
        (v = check_workspace(workspace, workspace_bytes)).failed())
        return v;
    if (c.epilogue.uses_vector() && !c.vec.data && c.vec.rows > 0)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "the epilogue needs BIAS_POINTER");
    if (c.epilogue.uses_aux() && !c.aux.data && c.m > 0 && c.n > 0)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "the epilogue needs EPILOGUE_AUX_POINTER");
    *call = c;
    return kOk;
}

}  // namespace

/* ---- the C API ------------------------------------------------------------------------------ */

/* A new object of kind `k`, its defaults set by `init`, handed out through `out`. */
template <typename Handle, typename Init>
static cublasStatus_t create_handle(Handle *out, kind k, Init init)
{
    if (!out)
        return CUBLAS_STATUS_INVALID_VALUE;
    lt_object *obj = create_object(k);
    if (!obj)
        return CUBLAS_STATUS_ALLOC_FAILED;
    init(obj);
    *out = reinterpret_cast<Handle>(obj);
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle)
{
    return create_handle(lightHandle, kind::handle, [](lt_object *) {});
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle)
{
    if (!lightHandle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    return destroy_object(lightHandle, kind::handle) == CUBLAS_STATUS_SUCCESS
               ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

const char *cublasLtGetStatusName(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "<unrecognized cublasStatus_t>";
}

const char *cublasLtGetStatusString(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "error detected trying to check the license";
    }
    return "<unrecognized cublasStatus_t>";
}

size_t cublasLtGetVersion(void)
{
    return CUBLAS_VERSION;
}

size_t cublasLtGetCudartVersion(void)
{
    return CUDART_VERSION;
}

cublasStatus_t cublasLtGetProperty(libraryPropertyType type, int *value)
{
    if (!value)
        return CUBLAS_STATUS_INVALID_VALUE;
    switch (type) {
    case MAJOR_VERSION: *value = CUBLAS_VER_MAJOR; return CUBLAS_STATUS_SUCCESS;
    case MINOR_VERSION: *value = CUBLAS_VER_MINOR; return CUBLAS_STATUS_SUCCESS;
    case PATCH_LEVEL: *value = CUBLAS_VER_PATCH; return CUBLAS_STATUS_SUCCESS;
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}

/* Destroy, SetAttribute and GetAttribute of one object type: the same for each, on its
 * own kind and attribute table. */
#define LT_OBJECT_ENTRIES(Name, Handle, Attribute, Kind, Table)                                 \
    cublasStatus_t cublasLt##Name##Destroy(Handle object)                                       \
    {                                                                                           \
        gb_emu::note_host_call("cublasLt" #Name "Destroy");                                     \
        return destroy_object(object, Kind);                                                    \
    }                                                                                           \
    cublasStatus_t cublasLt##Name##SetAttribute(Handle object, Attribute attr, const void *buf, \
                                                size_t sizeInBytes)                             \
    {                                                                                           \
        return set_attribute(find_object(object, Kind), Table, attr, buf, sizeInBytes);         \
    }                                                                                           \
    cublasStatus_t cublasLt##Name##GetAttribute(Handle object, Attribute attr, void *buf,       \
                                                size_t sizeInBytes, size_t *sizeWritten)        \
    {                                                                                           \
        return get_attribute(find_object(object, Kind), Table, attr, buf, sizeInBytes,          \
                             sizeWritten);                                                      \
    }

LT_OBJECT_ENTRIES(MatmulDesc, cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t,
                  kind::matmul_desc, kDescAttributes)
LT_OBJECT_ENTRIES(MatrixLayout, cublasLtMatrixLayout_t, cublasLtMatrixLayoutAttribute_t,
                  kind::layout, kLayoutAttributes)
LT_OBJECT_ENTRIES(MatmulPreference, cublasLtMatmulPreference_t,
                  cublasLtMatmulPreferenceAttributes_t, kind::preference, kPreferenceAttributes)

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                        cublasComputeType_t computeType, cudaDataType_t scaleType)
{
    gb_emu::note_host_call("cublasLtMatmulDescCreate");
    return create_handle(matmulDesc, kind::matmul_desc, [&](lt_object *obj) {
        set_default<int32_t>(obj, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, computeType);
        set_default<int32_t>(obj, CUBLASLT_MATMUL_DESC_SCALE_TYPE, scaleType);
        set_default<int32_t>(obj, CUBLASLT_MATMUL_DESC_POINTER_MODE, CUBLASLT_POINTER_MODE_HOST);
        set_default<int32_t>(obj, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_N);
        set_default<int32_t>(obj, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
        set_default<int32_t>(obj, CUBLASLT_MATMUL_DESC_TRANSC, CUBLAS_OP_N);
        set_default<int32_t>(obj, CUBLASLT_MATMUL_DESC_FILL_MODE, CUBLAS_FILL_MODE_FULL);
        set_default<uint32_t>(obj, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_DEFAULT);
        set_default<int32_t>(obj, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, -1);
        set_default<int32_t>(obj, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, -1);
    });
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld)
{
    gb_emu::note_host_call("cublasLtMatrixLayoutCreate");
    return create_handle(matLayout, kind::layout, [&](lt_object *obj) {
        set_default<uint32_t>(obj, CUBLASLT_MATRIX_LAYOUT_TYPE, (uint32_t)type);
        set_default<int32_t>(obj, CUBLASLT_MATRIX_LAYOUT_ORDER, CUBLASLT_ORDER_COL);
        set_default<uint64_t>(obj, CUBLASLT_MATRIX_LAYOUT_ROWS, rows);
        set_default<uint64_t>(obj, CUBLASLT_MATRIX_LAYOUT_COLS, cols);
        set_default<int64_t>(obj, CUBLASLT_MATRIX_LAYOUT_LD, ld);
        set_default<int32_t>(obj, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 1);
    });
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
    gb_emu::note_host_call("cublasLtMatmulPreferenceCreate");
    return create_handle(pref, kind::preference, [](lt_object *obj) {
        set_default<uint32_t>(obj, CUBLASLT_MATMUL_PREF_SEARCH_MODE, CUBLASLT_SEARCH_BEST_FIT);
        set_default<uint32_t>(obj, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                              CUBLASLT_REDUCTION_SCHEME_MASK);
        for (int id : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                       CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                       CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                       CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
            set_default<uint32_t>(obj, id, kDefaultAlignment);
        set_default<uint64_t>(obj, CUBLASLT_MATMUL_PREF_IMPL_MASK, ~(uint64_t)0);
    });
}

/* One algorithm, needing no workspace, for every problem the double computes; it records
 * the alignments it was chosen for, which cublasLtMatmul then holds the pointers to. */
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle,
                                              cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc,
                                              cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc,
                                              cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference,
                                              int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int *returnAlgoCount)
{
    gb_emu::note_host_call("cublasLtMatmulAlgoGetHeuristic");
    if (!find_object(lightHandle, kind::handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (requestedAlgoCount <= 0 || !heuristicResultsArray || !returnAlgoCount)
        return CUBLAS_STATUS_INVALID_VALUE;
    *returnAlgoCount = 0;
    const lt_object *pref = nullptr;
    if (preference && !(pref = find_object(preference, kind::preference)))
        return complain("cublasLtMatmulAlgoGetHeuristic",
                        refuse(CUBLAS_STATUS_INVALID_VALUE, "preference is not a live "
                               "preference descriptor"));
    cublasLtMatrixLayout_t layouts[4] = {Adesc, Bdesc, Cdesc, Ddesc};
    matmul_call c;
    algo_record record{};
    verdict v = read_problem(operationDesc, layouts, &c);
    if (!v.failed())
        v = choose_algo(c, pref, &record);
    if (v.status == CUBLAS_STATUS_NOT_SUPPORTED)
        return v.status;   // no algorithm: callers fall back, as with cuBLASLt
    if (v.failed())
        return complain("cublasLtMatmulAlgoGetHeuristic", v);
    cublasLtMatmulHeuristicResult_t &result = heuristicResultsArray[0];
    memset(&result, 0, sizeof result);
    memcpy(result.algo.data, &record, sizeof record);
    result.workspaceSize = 0;
    result.state = CUBLAS_STATUS_SUCCESS;
    result.wavesCount = 1.0f;
    *returnAlgoCount = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
                              const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
                              const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
                              void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream)
{
    matmul_call call;
    verdict v = prepare_matmul(lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C,
                               Cdesc, D, Ddesc, algo, workspace, workspaceSizeInBytes, &call);
    if (v.failed())
        return complain("cublasLtMatmul", v);
    if (call.m == 0 || call.n == 0)
        if (!call.epilogue.writes_vector())
            return CUBLAS_STATUS_SUCCESS;
    cudaError_t err = gb_emu::enqueue(stream, "cublasLtMatmul", [call] {
        if (gb_emu::counting)
            gb_emu::count_record("cublaslt", counted_fields(call));
        if (gb_emu::sampling())
            return;  // kernels run some blocks only, so no product is right: its cost is counted
        try {
            run_matmul(call);
        } catch (const std::bad_alloc &) {
            gb_emu::report("cublasLtMatmul: out of host memory for the f32 copies of A and B "
                           "(m=%" PRId64 ", n=%" PRId64 ", k=%" PRId64 ", batch=%" PRId64 ")",
                           call.m, call.n, call.k, call.batch);
        }
    });
    if (err != cudaSuccess)
        return complain("cublasLtMatmul", refuse(CUBLAS_STATUS_EXECUTION_FAILED, "the stream "
                        "refused the work: %s", cudaGetErrorString(err)));
    return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
