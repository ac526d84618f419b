/* The emulator's cuBLASLt double (cuda_emu/src/cublaslt.cc) against a plain triple loop in
 * double precision, through the CUDA runtime API and cublasLt.h only, so the same program
 * would run on a GPU with the real libraries.
 *
 * Covered: every epilogue the double has, transposes, row and column order, strided
 * batches (broadcast stride 0 included), f32 / bf16 / f16 operands with f32 or 16-bit
 * outputs, the FAST_TF32 / 16BF / 16F compute types (exact rounding checks too), alpha,
 * beta, C == D, device-side alpha and beta, results independent of the OpenMP thread count
 * (the program runs itself again with OMP_NUM_THREADS=1 and 3), f32 products against
 * oneDNN's dnnl_sgemm (when built with GB_TEST_HAVE_DNNL), and the refusals: too small a
 * leading dimension, bias epilogues on a row-order D, host or undersized pointers,
 * pointers less aligned than the heuristic was told, unknown attributes and types.
 *
 * Tolerances: the double sums in f32, so an element may differ from the exact sum by
 * (k + 2) 2^-24 sum |a b|, plus one rounding per addition of beta C and bias, plus GELU's
 * f32 evaluation (1e-5 relative) and its tanh, which the double takes to 11 significant
 * bits as a GPU's hardware tanh (2^-11 of tanh: 2^-12 |x| of GELU, 2^-11 (1/2 + |x| u')
 * of its derivative), plus half an ulp of the output type (2^-8 for bf16, 2^-11 for f16,
 * 2^-24 for f32). The reference uses the same (rounded) inputs.
 *
 * Prints "ok: ..." / "FAIL: ..." lines; exits 1 on a failure.
 */
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

#ifdef GB_TEST_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif
#if defined(__clang__) && __clang_major__ < 15
#include <immintrin.h>   // F16C: ref_f16_bits
#endif

namespace {

int failures = 0;

void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    failures++;
}

void ok(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ok(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("ok: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

#define CUDA_OR_DIE(call)                                                                 \
    do {                                                                                  \
        cudaError_t err_ = (call);                                                        \
        if (err_ != cudaSuccess) {                                                        \
            printf("FAIL: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,                    \
                   cudaGetErrorString(err_));                                             \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

#define LT_OR_DIE(call)                                                                   \
    do {                                                                                  \
        cublasStatus_t st_ = (call);                                                      \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                               \
            printf("FAIL: %s:%d: %s: status %d\n", __FILE__, __LINE__, #call, (int)st_);  \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

/* ---- element types, rounded here independently of the double ---------------------------- */

enum dtype { F32, BF16, F16 };

const char *dtype_name(dtype t)
{
    return t == F32 ? "f32" : t == BF16 ? "bf16" : "f16";
}

cudaDataType_t cuda_type(dtype t)
{
    return t == F32 ? CUDA_R_32F : t == BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

size_t dtype_bytes(dtype t)
{
    return t == F32 ? 4 : 2;
}

/* binary16 from the compiler or the CPU, a reference independent of gearbox/convert.h:
 * _Float16, or on clang before 15, which has no _Float16 on x86, F16C's conversions
 * (round to nearest even, as _Float16's). */
#if defined(__clang__) && __clang_major__ < 15
__attribute__((target("f16c"))) uint16_t ref_f16_bits(float x)
{
    return (uint16_t)_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT);
}
__attribute__((target("f16c"))) float ref_f16_value(uint16_t h)
{
    return _cvtsh_ss(h);
}
#else
uint16_t ref_f16_bits(float x)
{
    _Float16 h = (_Float16)x;
    uint16_t bits;
    memcpy(&bits, &h, 2);
    return bits;
}
float ref_f16_value(uint16_t bits)
{
    _Float16 h;
    memcpy(&h, &bits, 2);
    return (float)h;
}
#endif

/* Significant bits kept, implicit bit included. */
int precision_bits(dtype t)
{
    return t == F32 ? 24 : t == BF16 ? 8 : 11;
}

/* Round to `bits` significant bits, nearest even (nearbyint in the default rounding mode);
 * exponent range as f32's, which is bf16's and tf32's. */
float round_significand(float x, int bits)
{
    if (!std::isfinite(x) || x == 0.0f)
        return x;
    int e;
    double m = std::frexp((double)x, &e);
    return (float)std::ldexp(std::nearbyint(std::ldexp(m, bits)), e - bits);
}

float round_to(dtype t, float x)
{
    switch (t) {
    case F32: return x;
    case BF16: return round_significand(x, 8);
    case F16: return ref_f16_value(ref_f16_bits(x));
    }
    return x;
}

void encode(dtype t, float x, unsigned char *out)
{
    if (t == F32) {
        memcpy(out, &x, 4);
    } else if (t == BF16) {
        float r = round_to(BF16, x);
        uint32_t bits;
        memcpy(&bits, &r, 4);
        if (std::isnan(x))
            bits |= 0x00400000u;
        uint16_t h = (uint16_t)(bits >> 16);
        memcpy(out, &h, 2);
    } else {
        uint16_t h = ref_f16_bits(x);
        memcpy(out, &h, 2);
    }
}

float decode(dtype t, const unsigned char *in)
{
    if (t == F32) {
        float x;
        memcpy(&x, in, 4);
        return x;
    }
    if (t == BF16) {
        uint16_t h;
        memcpy(&h, in, 2);
        uint32_t bits = (uint32_t)h << 16;
        float x;
        memcpy(&x, &bits, 4);
        return x;
    }
    uint16_t h;
    memcpy(&h, in, 2);
    return ref_f16_value(h);
}

/* ---- device buffers ------------------------------------------------------------------- */

struct device_buffer {
    void *ptr = nullptr;
    size_t bytes = 0;
};

device_buffer upload(dtype t, const std::vector<float> &values)
{
    device_buffer buf;
    buf.bytes = values.size() * dtype_bytes(t);
    std::vector<unsigned char> raw(buf.bytes > 0 ? buf.bytes : 1);
    for (size_t i = 0; i < values.size(); i++)
        encode(t, values[i], raw.data() + i * dtype_bytes(t));
    CUDA_OR_DIE(cudaMalloc(&buf.ptr, buf.bytes > 0 ? buf.bytes : 1));
    if (buf.bytes > 0)
        CUDA_OR_DIE(cudaMemcpy(buf.ptr, raw.data(), buf.bytes, cudaMemcpyHostToDevice));
    return buf;
}

std::vector<float> download(dtype t, const device_buffer &buf)
{
    std::vector<unsigned char> raw(buf.bytes);
    if (buf.bytes > 0)
        CUDA_OR_DIE(cudaMemcpy(raw.data(), buf.ptr, buf.bytes, cudaMemcpyDeviceToHost));
    std::vector<float> values(buf.bytes / dtype_bytes(t));
    for (size_t i = 0; i < values.size(); i++)
        values[i] = decode(t, raw.data() + i * dtype_bytes(t));
    return values;
}

void release(device_buffer &buf)
{
    if (buf.ptr)
        CUDA_OR_DIE(cudaFree(buf.ptr));
    buf.ptr = nullptr;
}

/* ---- data ------------------------------------------------------------------------------- */

struct rng {
    uint64_t state;
    /* uniform in [lo, hi) */
    float next(float lo, float hi)
    {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        return lo + (hi - lo) * (float)((state >> 40) * 0x1p-24);
    }
};

/* One stored matrix (cuBLASLt's layout, with strided batches). */
struct layout_desc {
    dtype type;
    bool row;
    int64_t rows, cols, ld, stride;
    int64_t at(int64_t r, int64_t c, int64_t b) const
    {
        return b * stride + (row ? r * ld + c : r + c * ld);
    }
    int64_t elements(int64_t batch) const
    {
        return rows == 0 || cols == 0 ? 0 : at(rows - 1, cols - 1, batch - 1) + 1;
    }
};

std::vector<float> random_values(dtype t, size_t count, rng &r, float lo, float hi)
{
    std::vector<float> v(count);
    for (float &x : v)
        x = round_to(t, r.next(lo, hi));
    return v;
}

cublasLtMatrixLayout_t make_layout(const layout_desc &l, int64_t batch)
{
    cublasLtMatrixLayout_t h;
    LT_OR_DIE(cublasLtMatrixLayoutCreate(&h, cuda_type(l.type), (uint64_t)l.rows,
                                         (uint64_t)l.cols, l.ld));
    if (l.row) {
        int32_t order = CUBLASLT_ORDER_ROW;
        LT_OR_DIE(cublasLtMatrixLayoutSetAttribute(h, CUBLASLT_MATRIX_LAYOUT_ORDER, &order,
                                                   sizeof order));
    }
    if (batch > 1) {
        int32_t count = (int32_t)batch;
        int64_t stride = l.stride;
        LT_OR_DIE(cublasLtMatrixLayoutSetAttribute(h, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                   &count, sizeof count));
        LT_OR_DIE(cublasLtMatrixLayoutSetAttribute(h, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                   &stride, sizeof stride));
    }
    return h;
}

/* What every batch entry's pointer is aligned to, as matmul.c tells the heuristic. */
uint32_t alignment_of(const void *p, int64_t stride_bytes)
{
    uint64_t bits = (uint64_t)(uintptr_t)p | (uint64_t)stride_bytes | 256u;
    return (uint32_t)(bits & (~bits + 1));
}

void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const void *v,
              size_t size)
{
    LT_OR_DIE(cublasLtMatmulDescSetAttribute(d, attr, v, size));
}

/* ---- the reference -------------------------------------------------------------------- */

/* How far cuBLASLt's tanh may be from the exact one (relative). */
constexpr double LT_TANH_ERROR = 0x1p-11;

/* u' of the tanh form's u(x) = sqrt(2/pi) (x + 0.044715 x^3). */
double gelu_tanh_du(double x)
{
    return std::sqrt(2.0 / M_PI) * (1.0 + 3.0 * 0.044715 * x * x);
}

double gelu_tanh(double x)
{
    const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    return 0.5 * x * (1.0 + std::tanh(u));
}

double gelu_tanh_grad(double x)
{
    const double c = std::sqrt(2.0 / M_PI);
    const double t = std::tanh(c * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * gelu_tanh_du(x);
}

struct epilogue_info {
    uint32_t value;
    const char *name;
    bool bias, relu, gelu, aux_out, dgelu, bgrad_a, bgrad_b, bgrad_d;
};

const epilogue_info kEpilogues[] = {
    {CUBLASLT_EPILOGUE_DEFAULT, "DEFAULT", false, false, false, false, false, false, false, false},
    {CUBLASLT_EPILOGUE_RELU, "RELU", false, true, false, false, false, false, false, false},
    {CUBLASLT_EPILOGUE_BIAS, "BIAS", true, false, false, false, false, false, false, false},
    {CUBLASLT_EPILOGUE_RELU_BIAS, "RELU_BIAS", true, true, false, false, false, false, false, false},
    {CUBLASLT_EPILOGUE_GELU, "GELU", false, false, true, false, false, false, false, false},
    {CUBLASLT_EPILOGUE_GELU_BIAS, "GELU_BIAS", true, false, true, false, false, false, false, false},
    {CUBLASLT_EPILOGUE_GELU_AUX, "GELU_AUX", false, false, true, true, false, false, false, false},
    {CUBLASLT_EPILOGUE_GELU_AUX_BIAS, "GELU_AUX_BIAS", true, false, true, true, false, false, false, false},
    {CUBLASLT_EPILOGUE_DGELU, "DGELU", false, false, false, false, true, false, false, false},
    {CUBLASLT_EPILOGUE_DGELU_BGRAD, "DGELU_BGRAD", false, false, false, false, true, false, false, true},
    {CUBLASLT_EPILOGUE_BGRADA, "BGRADA", false, false, false, false, false, true, false, false},
    {CUBLASLT_EPILOGUE_BGRADB, "BGRADB", false, false, false, false, false, false, true, false},
};

const epilogue_info &epilogue_named(uint32_t value)
{
    for (const epilogue_info &e : kEpilogues)
        if (e.value == value)
            return e;
    return kEpilogues[0];
}

/* One matmul to run and check. */
struct spec {
    dtype ab = F32, cd = F32;
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    int64_t m = 13, n = 11, k = 37, batch = 1;
    bool ta = false, tb = false, row = false;
    bool broadcast_a = false, broadcast_b = false;
    uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    float alpha = 1.0f, beta = 0.0f;
    bool in_place = false;          // C == D
    bool device_scalars = false;    // CUBLASLT_POINTER_MODE_DEVICE
    bool batched_bias = false;      // a BIAS_BATCH_STRIDE
    bool nan_in_c = false;          // C holds NaN (beta must be 0)
    uint64_t seed = 1;
};

std::string describe(const spec &s)
{
    char text[256];
    snprintf(text, sizeof text, "%s x %s -> %s, %s%s, m=%" PRId64 " n=%" PRId64 " k=%" PRId64
             " batch=%" PRId64 "%s%s, %s order, %s, alpha=%g beta=%g%s%s",
             dtype_name(s.ab), dtype_name(s.ab), dtype_name(s.cd),
             s.ta ? "T" : "N", s.tb ? "T" : "N", s.m, s.n, s.k, s.batch,
             s.broadcast_a ? " (A broadcast)" : "", s.broadcast_b ? " (B broadcast)" : "",
             s.row ? "row" : "column", epilogue_named(s.epilogue).name, (double)s.alpha,
             (double)s.beta, s.in_place ? ", C == D" : "",
             s.compute == CUBLAS_COMPUTE_32F_FAST_TF32 ? ", TF32"
             : s.compute == CUBLAS_COMPUTE_32F_FAST_16BF ? ", FAST_16BF"
             : s.compute == CUBLAS_COMPUTE_32F_FAST_16F ? ", FAST_16F" : "");
    return text;
}

/* The inputs as the compute type multiplies them. */
float as_multiplied(const spec &s, float x)
{
    switch (s.compute) {
    case CUBLAS_COMPUTE_32F_FAST_TF32: return round_significand(x, 11);
    case CUBLAS_COMPUTE_32F_FAST_16BF: return round_to(BF16, x);
    case CUBLAS_COMPUTE_32F_FAST_16F: return round_to(F16, x);
    default: return x;
    }
}

/* The host side of a case: layouts, inputs, and the buffers' initial contents. */
struct problem {
    layout_desc la, lb, lc, ld, laux;
    int64_t vec_len = 0, vec_stride = 0;
    std::vector<float> a, b, c, d0, bias, aux0, vec0;
};

problem make_problem(const spec &s, const epilogue_info &ep)
{
    problem p;
    rng r{s.seed * 0x9e3779b97f4a7c15ull + 12345};
    auto stored = [&](dtype t, int64_t rows, int64_t cols, int64_t pad, bool broadcast) {
        layout_desc l{t, s.row, rows, cols, (s.row ? cols : rows) + pad, 0};
        l.stride = broadcast ? 0 : l.ld * (s.row ? rows : cols) + 5;
        return l;
    };
    p.la = stored(s.ab, s.ta ? s.k : s.m, s.ta ? s.m : s.k, 3, s.broadcast_a);
    p.lb = stored(s.ab, s.tb ? s.n : s.k, s.tb ? s.k : s.n, 2, s.broadcast_b);
    p.ld = stored(s.cd, s.m, s.n, 1, false);
    p.lc = s.in_place ? p.ld : stored(s.cd, s.m, s.n, 4, false);
    p.a = random_values(s.ab, (size_t)p.la.elements(s.batch), r, -1.0f, 1.0f);
    p.b = random_values(s.ab, (size_t)p.lb.elements(s.batch), r, -1.0f, 1.0f);
    p.c = random_values(s.cd, (size_t)p.lc.elements(s.batch), r, -1.0f, 1.0f);
    if (s.nan_in_c)
        for (float &x : p.c)
            x = NAN;
    p.d0 = s.in_place ? p.c : random_values(s.cd, (size_t)p.ld.elements(s.batch), r, -1.0f, 1.0f);
    if (ep.bias || ep.bgrad_a || ep.bgrad_b || ep.bgrad_d) {
        p.vec_len = ep.bgrad_b ? s.n : s.m;
        p.vec_stride = s.batched_bias || ((ep.bgrad_a || ep.bgrad_b || ep.bgrad_d) && s.batch > 1)
                           ? p.vec_len + 3 : 0;
        p.vec0 = random_values(s.cd, (size_t)((s.batch - 1) * p.vec_stride + p.vec_len), r,
                               -1.0f, 1.0f);
    }
    if (ep.aux_out || ep.dgelu) {
        const int64_t aux_ld = (s.m + 7) / 8 * 8 + 8;
        p.laux = layout_desc{s.cd, false, s.m, s.n, aux_ld, aux_ld * s.n + 8};
        p.aux0 = random_values(s.cd, (size_t)p.laux.elements(s.batch), r, -3.0f, 3.0f);
    }
    return p;
}

/* What the exact computation gives, with the bound on the double's error. */
struct expected {
    std::vector<double> d, d_tol, aux, aux_tol, vec, vec_tol;
};

double half_ulp(dtype t, double x)
{
    return std::fabs(x) * std::ldexp(1.0, -precision_bits(t)) + 1e-30;
}

expected reference(const spec &s, const epilogue_info &ep, const problem &p)
{
    expected e;
    e.d = std::vector<double>(p.d0.begin(), p.d0.end());
    e.d_tol.assign(e.d.size(), 0.0);
    if (!p.aux0.empty()) {
        e.aux = std::vector<double>(p.aux0.begin(), p.aux0.end());
        e.aux_tol.assign(e.aux.size(), 0.0);
    }
    e.vec = std::vector<double>(p.vec0.begin(), p.vec0.end());
    e.vec_tol.assign(e.vec.size(), 0.0);
    const double u = std::ldexp(1.0, -24);
    for (int64_t bi = 0; bi < s.batch; bi++) {
        std::vector<double> row_sum(s.m, 0.0), row_sum_tol(s.m, 0.0);
        for (int64_t j = 0; j < s.n; j++)
            for (int64_t i = 0; i < s.m; i++) {
                double sum = 0.0, sum_abs = 0.0;
                for (int64_t q = 0; q < s.k; q++) {
                    double a = as_multiplied(s, p.a[p.la.at(s.ta ? q : i, s.ta ? i : q, bi)]);
                    double b = as_multiplied(s, p.b[p.lb.at(s.tb ? j : q, s.tb ? q : j, bi)]);
                    sum += a * b;
                    sum_abs += std::fabs(a * b);
                }
                double v = (double)s.alpha * sum;
                double tol = std::fabs((double)s.alpha) * (double)(s.k + 2) * u * sum_abs;
                if (s.beta != 0.0f) {
                    double cv = (double)s.beta * p.c[p.lc.at(i, j, bi)];
                    v += cv;
                    tol += 2 * u * (std::fabs(cv) + std::fabs(v));
                }
                if (ep.bias) {
                    double bv = p.vec0[bi * p.vec_stride + i];
                    v += bv;
                    tol += 2 * u * (std::fabs(bv) + std::fabs(v));
                }
                tol = 2 * tol + 1e-30;
                const int64_t aux_at = p.aux0.empty() ? 0 : p.laux.at(i, j, bi);
                if (ep.aux_out) {
                    e.aux[aux_at] = v;
                    e.aux_tol[aux_at] = tol + half_ulp(s.cd, v);
                }
                if (ep.gelu) {
                    const double x = v;
                    v = gelu_tanh(x);
                    tol = 1.2 * tol + 1e-5 * std::fabs(v) + 1e-6 +
                          0.5 * std::fabs(x) * LT_TANH_ERROR;
                }
                if (ep.relu)
                    v = v > 0.0 ? v : 0.0;
                if (ep.dgelu) {
                    const double x = p.aux0[aux_at], g = gelu_tanh_grad(x);
                    const double dg = LT_TANH_ERROR * (0.5 + std::fabs(x) * gelu_tanh_du(x));
                    tol = tol * std::fabs(g) + std::fabs(v) * dg;
                    v *= g;
                    tol += 1e-5 * std::fabs(v) + 1e-6;
                }
                const int64_t d_at = p.ld.at(i, j, bi);
                e.d[d_at] = v;
                e.d_tol[d_at] = tol + half_ulp(s.cd, v) + half_ulp(F32, v);
                row_sum[i] += v;
                row_sum_tol[i] += tol + 2 * u * (double)s.n * std::fabs(v);
            }
        if (ep.bgrad_a || ep.bgrad_b || ep.bgrad_d) {
            for (int64_t x = 0; x < p.vec_len; x++) {
                double sum = 0.0, tol = 0.0;
                if (ep.bgrad_d) {
                    sum = row_sum[x];
                    tol = row_sum_tol[x];
                } else {
                    double sum_abs = 0.0;
                    for (int64_t q = 0; q < s.k; q++) {
                        double val = ep.bgrad_a
                            ? as_multiplied(s, p.a[p.la.at(s.ta ? q : x, s.ta ? x : q, bi)])
                            : as_multiplied(s, p.b[p.lb.at(s.tb ? x : q, s.tb ? q : x, bi)]);
                        sum += val;
                        sum_abs += std::fabs(val);
                    }
                    tol = 2 * (double)(s.k + 2) * u * sum_abs;
                }
                e.vec[bi * p.vec_stride + x] = sum;
                e.vec_tol[bi * p.vec_stride + x] = tol + half_ulp(s.cd, sum) + 1e-30;
            }
        }
    }
    return e;
}

/* Elements off every matrix keep their initial values (e.d holds them already). */
bool compare(const char *what, const std::vector<float> &got, const std::vector<double> &want,
             const std::vector<double> &tol, const std::string &label)
{
    if (got.size() != want.size()) {
        fail("%s: %s: %zu elements back, %zu expected", label.c_str(), what, got.size(),
             want.size());
        return false;
    }
    for (size_t i = 0; i < got.size(); i++) {
        const double g = got[i], w = want[i];
        const bool same_nan = std::isnan(g) && std::isnan(w);
        if (!same_nan && !(std::fabs(g - w) <= tol[i])) {
            fail("%s: %s[%zu] = %.9g, expected %.9g (tolerance %.3g)", label.c_str(), what, i,
                 g, w, tol[i]);
            return false;
        }
    }
    return true;
}

/* Runs `s` through the heuristic and cublasLtMatmul on `stream`; true when it matched. */
bool run_case(cublasLtHandle_t lt, cudaStream_t stream, const spec &s, device_buffer workspace)
{
    const epilogue_info &ep = epilogue_named(s.epilogue);
    const std::string label = describe(s);
    problem p = make_problem(s, ep);
    expected e = reference(s, ep, p);

    device_buffer a = upload(s.ab, p.a), b = upload(s.ab, p.b), d = upload(s.cd, p.d0);
    device_buffer c = s.in_place ? d : upload(s.cd, p.c);
    device_buffer vec, aux, scalars;
    if (!p.vec0.empty())
        vec = upload(s.cd, p.vec0);
    if (!p.aux0.empty())
        aux = upload(s.cd, p.aux0);

    cublasLtMatmulDesc_t desc;
    LT_OR_DIE(cublasLtMatmulDescCreate(&desc, s.compute, CUDA_R_32F));
    int32_t ta = s.ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = s.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &s.epilogue, sizeof s.epilogue);
    if (vec.ptr) {
        set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vec.ptr, sizeof vec.ptr);
        set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &p.vec_stride, sizeof p.vec_stride);
    }
    if (aux.ptr) {
        set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux.ptr, sizeof aux.ptr);
        set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &p.laux.ld, sizeof p.laux.ld);
        set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &p.laux.stride,
                 sizeof p.laux.stride);
    }
    const void *alpha = &s.alpha, *beta = &s.beta;
    if (s.device_scalars) {
        scalars = upload(F32, {s.alpha, s.beta});
        alpha = scalars.ptr;
        beta = (const char *)scalars.ptr + 4;
        int32_t mode = CUBLASLT_POINTER_MODE_DEVICE;
        set_desc(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode, sizeof mode);
    }
    cublasLtMatrixLayout_t la = make_layout(p.la, s.batch), lb = make_layout(p.lb, s.batch);
    cublasLtMatrixLayout_t lc = make_layout(p.lc, s.batch), ld = make_layout(p.ld, s.batch);

    cublasLtMatmulPreference_t pref;
    LT_OR_DIE(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t max_ws = workspace.bytes;
    LT_OR_DIE(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                   &max_ws, sizeof max_ws));
    const int64_t ab_bytes = (int64_t)dtype_bytes(s.ab), cd_bytes = (int64_t)dtype_bytes(s.cd);
    const bool batched = s.batch > 1;
    const struct { cublasLtMatmulPreferenceAttributes_t attr; uint32_t align; } aligns[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment_of(a.ptr, batched ? p.la.stride * ab_bytes : 0)},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment_of(b.ptr, batched ? p.lb.stride * ab_bytes : 0)},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment_of(c.ptr, batched ? p.lc.stride * cd_bytes : 0)},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment_of(d.ptr, batched ? p.ld.stride * cd_bytes : 0)},
    };
    for (const auto &al : aligns)
        LT_OR_DIE(cublasLtMatmulPreferenceSetAttribute(pref, al.attr, &al.align, sizeof al.align));
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    bool passed = true;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, ld, pref, 1,
                                                       &result, &found);
    if (st != CUBLAS_STATUS_SUCCESS || found != 1 || result.state != CUBLAS_STATUS_SUCCESS ||
        result.workspaceSize > workspace.bytes) {
        fail("%s: heuristic: status %d, %d found", label.c_str(), (int)st, found);
        passed = false;
    } else {
        st = cublasLtMatmul(lt, desc, alpha, a.ptr, la, b.ptr, lb, beta, c.ptr, lc, d.ptr, ld,
                            &result.algo, workspace.ptr, workspace.bytes, stream);
        if (st != CUBLAS_STATUS_SUCCESS) {
            fail("%s: cublasLtMatmul: %s", label.c_str(), cublasLtGetStatusName(st));
            passed = false;
        }
    }
    /* the computation must not need what is destroyed once cublasLtMatmul returns */
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatmulDescDestroy(desc);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatrixLayoutDestroy(ld);
    CUDA_OR_DIE(cudaStreamSynchronize(stream));
    if (passed) {
        passed = compare("D", download(s.cd, d), e.d, e.d_tol, label);
        if (passed && aux.ptr)
            passed = compare("aux", download(s.cd, aux), e.aux, e.aux_tol, label);
        if (passed && vec.ptr)
            passed = compare("bias", download(s.cd, vec), e.vec, e.vec_tol, label);
    }
    release(a);
    release(b);
    release(d);
    if (!s.in_place)
        release(c);
    release(vec);
    release(aux);
    release(scalars);
    return passed;
}

/* ---- the sweeps ------------------------------------------------------------------------ */

struct type_pair {
    dtype ab, cd;
};
const type_pair kTypePairs[] = {{F32, F32}, {BF16, BF16}, {BF16, F32}, {F16, F16}, {F16, F32}};

/* A default problem with A and B of tp.ab, C and D of tp.cd. */
spec typed(const type_pair &tp)
{
    spec s;
    s.ab = tp.ab;
    s.cd = tp.cd;
    return s;
}

/* The problems of one sweep: each one added gets the next seed, so a failure reproduces. */
struct sweep_specs {
    std::vector<spec> list;
    uint64_t seed;
    void add(spec s)
    {
        s.seed = seed++;
        list.push_back(s);
    }
};

struct fixture {
    cublasLtHandle_t lt;
    cudaStream_t stream;
    device_buffer workspace;
};

void sweep(const fixture &f, const char *what, const std::vector<spec> &specs)
{
    int passed = 0;
    for (const spec &s : specs)
        passed += run_case(f.lt, f.stream, s, f.workspace);
    if (passed == (int)specs.size())
        ok("%s (%zu cases)", what, specs.size());
}

void test_epilogues(const fixture &f)
{
    sweep_specs specs{{}, 100};
    for (const type_pair &tp : kTypePairs)
        for (const epilogue_info &ep : kEpilogues)
            for (int trans = 0; trans < 4; trans++)
                for (int64_t batch : {1, 3}) {
                    spec s = typed(tp);
                    s.epilogue = ep.value;
                    s.ta = trans & 1;
                    s.tb = trans & 2;
                    s.batch = batch;
                    s.alpha = batch == 1 ? 1.0f : 0.75f;
                    s.beta = ep.bgrad_a || trans == 3 ? 0.5f : 0.0f;
                    s.batched_bias = batch > 1 && trans == 1;
                    specs.add(s);
                }
    sweep(f, "every epilogue x {f32, bf16, f16 -> same, f32} x transposes x batch 1, 3",
          specs.list);
}

void test_row_order(const fixture &f)
{
    sweep_specs specs{{}, 1000};
    for (const type_pair &tp : kTypePairs)
        for (uint32_t epilogue : {CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_GELU,
                                  CUBLASLT_EPILOGUE_RELU})
            for (int trans = 0; trans < 4; trans++) {
                spec s = typed(tp);
                s.row = true;
                s.epilogue = epilogue;
                s.ta = trans & 1;
                s.tb = trans & 2;
                s.batch = trans == 2 ? 2 : 1;
                s.beta = trans == 1 ? -0.5f : 0.0f;
                specs.add(s);
            }
    sweep(f, "row-order A, B, C, D x types x transposes", specs.list);
}

void test_batches_and_sizes(const fixture &f)
{
    sweep_specs specs{{}, 2000};
    for (const type_pair &tp : kTypePairs) {
        spec s = typed(tp);
        s.batch = 4;
        s.broadcast_a = true;
        specs.add(s);
        s.broadcast_a = false;
        s.broadcast_b = true;
        s.tb = true;
        s.epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
        specs.add(s);
        s = typed(tp);
        s.m = 70;
        s.n = 33;
        s.k = 129;
        s.ta = true;
        s.beta = 1.0f;
        s.epilogue = CUBLASLT_EPILOGUE_DGELU_BGRAD;
        specs.add(s);
        s.epilogue = CUBLASLT_EPILOGUE_BGRADB;
        s.batch = 2;
        s.broadcast_a = true;
        specs.add(s);
    }
    for (int64_t k : {0, 1, 2}) {   // k = 0: D = beta C (+ epilogue)
        spec s;
        s.k = k;
        s.beta = 0.25f;
        s.epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;
        specs.add(s);
    }
    spec one;
    one.m = one.n = 1;
    one.k = 5;
    specs.add(one);
    sweep(f, "broadcast batches (stride 0), 70 x 33 x 129, k = 0, 1, 2, 1 x 1", specs.list);
}

void test_scalars_and_in_place(const fixture &f)
{
    sweep_specs specs{{}, 3000};
    for (const type_pair &tp : kTypePairs) {
        spec s = typed(tp);
        s.in_place = true;
        s.beta = 1.0f;
        s.alpha = -2.0f;
        s.batch = 2;
        s.epilogue = CUBLASLT_EPILOGUE_BIAS;
        specs.add(s);
        s.device_scalars = true;
        s.in_place = false;
        s.beta = 0.5f;
        s.epilogue = CUBLASLT_EPILOGUE_DGELU;
        specs.add(s);
        s = typed(tp);
        s.nan_in_c = true;   // beta = 0 reads no C
        specs.add(s);
    }
    sweep(f, "C == D, alpha != 1, device alpha and beta, NaN in C with beta = 0", specs.list);
}

void test_fast_compute(const fixture &f)
{
    sweep_specs specs{{}, 4000};
    for (cublasComputeType_t ct : {CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_COMPUTE_32F_FAST_16BF,
                                   CUBLAS_COMPUTE_32F_FAST_16F})
        for (int trans = 0; trans < 4; trans++) {
            spec s;
            s.compute = ct;
            s.ta = trans & 1;
            s.tb = trans & 2;
            s.m = 37;
            s.n = 21;
            s.k = 300;
            s.batch = trans == 3 ? 2 : 1;
            s.epilogue = trans == 2 ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
            specs.add(s);
        }
    sweep(f, "FAST_TF32, FAST_16BF, FAST_16F against rounded inputs", specs.list);
}

/* ---- exact checks: input rounding, output rounding, NaN -------------------------------- */

/* A 1 x 1 x 1 product a * 1 with the given types: what D holds, as raw bits widened. */
uint32_t single_product(const fixture &f, cublasComputeType_t compute, dtype ab, dtype cd, float a)
{
    device_buffer da = upload(ab, {a}), db = upload(ab, {1.0f}), dd = upload(cd, {0.0f});
    cublasLtMatmulDesc_t desc;
    LT_OR_DIE(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
    cublasLtMatrixLayout_t la, ld;
    LT_OR_DIE(cublasLtMatrixLayoutCreate(&la, cuda_type(ab), 1, 1, 1));
    LT_OR_DIE(cublasLtMatrixLayoutCreate(&ld, cuda_type(cd), 1, 1, 1));
    const float alpha = 1.0f, beta = 0.0f;
    LT_OR_DIE(cublasLtMatmul(f.lt, desc, &alpha, da.ptr, la, db.ptr, la, &beta, dd.ptr, ld,
                             dd.ptr, ld, nullptr, nullptr, 0, f.stream));
    CUDA_OR_DIE(cudaStreamSynchronize(f.stream));
    uint32_t bits = 0;
    CUDA_OR_DIE(cudaMemcpy(&bits, dd.ptr, dtype_bytes(cd), cudaMemcpyDeviceToHost));
    cublasLtMatmulDescDestroy(desc);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(ld);
    release(da);
    release(db);
    release(dd);
    return bits;
}

uint32_t f32_bits(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, 4);
    return bits;
}

void test_exact_rounding(const fixture &f)
{
    const struct {
        cublasComputeType_t compute;
        dtype ab, cd;
        float in;
        uint32_t want;
        const char *what;
    } cases[] = {
        {CUBLAS_COMPUTE_32F_FAST_TF32, F32, F32, 1.0f + 0x1p-20f, f32_bits(1.0f), "tf32 drops 2^-20"},
        {CUBLAS_COMPUTE_32F_FAST_TF32, F32, F32, 1.0f + 0x1p-11f, f32_bits(1.0f), "tf32 tie to even (down)"},
        {CUBLAS_COMPUTE_32F_FAST_TF32, F32, F32, 1.0f + 0x3p-11f, f32_bits(1.0f + 0x1p-9f), "tf32 tie to even (up)"},
        {CUBLAS_COMPUTE_32F_FAST_TF32, F32, F32, 1.0f + 0x1p-11f + 0x1p-20f, f32_bits(1.0f + 0x1p-10f), "tf32 above the tie"},
        {CUBLAS_COMPUTE_32F, F32, F32, 1.0f + 0x1p-20f, f32_bits(1.0f + 0x1p-20f), "f32 keeps 2^-20"},
        {CUBLAS_COMPUTE_32F_FAST_16BF, F32, F32, 1.0f + 0x1p-8f, f32_bits(1.0f), "fast bf16 tie to even"},
        {CUBLAS_COMPUTE_32F_FAST_16F, F32, F32, 1.0f + 0x3p-11f, f32_bits(1.0f + 0x1p-9f), "fast f16 tie to even"},
        {CUBLAS_COMPUTE_32F, BF16, BF16, 3.0f, 0x4040u, "bf16 3"},
        {CUBLAS_COMPUTE_32F, F16, F16, -2.0f, 0xc000u, "f16 -2"},
        {CUBLAS_COMPUTE_32F, F16, F16, 70000.0f, 0x7c00u, "f16 input overflows to inf"},
    };
    bool all = true;
    for (const auto &c : cases) {
        uint32_t got = single_product(f, c.compute, c.ab, c.cd, c.in);
        if (got != c.want) {
            fail("exact rounding: %s: D bits 0x%08x, expected 0x%08x", c.what, got, c.want);
            all = false;
        }
    }
    /* NaN through a 16-bit D stays NaN (a quiet NaN, not infinity) */
    for (dtype t : {BF16, F16}) {
        uint32_t got = single_product(f, CUBLAS_COMPUTE_32F, t, t, NAN);
        const bool is_nan = t == BF16 ? (got & 0x7f80u) == 0x7f80u && (got & 0x7fu) != 0
                                      : (got & 0x7c00u) == 0x7c00u && (got & 0x3ffu) != 0;
        if (!is_nan) {
            fail("exact rounding: NaN into %s D gives bits 0x%04x", dtype_name(t), got);
            all = false;
        }
    }
    if (all)
        ok("TF32 / FAST_16BF / FAST_16F input rounding to nearest even, 16-bit outputs, NaN");
}

/* alpha a b with alpha making an exact f32 tie between two values of D's 16-bit type: the
 * double must round it to nearest even. */
void test_output_rounding(const fixture &f)
{
    const struct {
        dtype t;
        float a, alpha;
        uint16_t want;
        const char *what;
    } cases[] = {
        {BF16, 1.0f, 1.0f + 0x1p-8f, 0x3f80u, "bf16 D: 1 + 2^-8 ties to 1"},
        {BF16, 1.0f, 1.0f + 0x3p-8f, 0x3f82u, "bf16 D: 1 + 3 2^-8 ties to 1 + 2^-6"},
        {F16, 1.0f, 1.0f + 0x1p-11f, 0x3c00u, "f16 D: 1 + 2^-11 ties to 1"},
        {F16, 1.0f, 1.0f + 0x3p-11f, 0x3c02u, "f16 D: 1 + 3 2^-11 ties to 1 + 2^-9"},
        {F16, 256.0f, 256.0f, 0x7c00u, "f16 D: 65536 overflows to inf"},
    };
    bool all = true;
    for (const auto &c : cases) {
        device_buffer da = upload(c.t, {c.a}), db = upload(c.t, {1.0f}), dd = upload(c.t, {0.0f});
        cublasLtMatmulDesc_t desc;
        LT_OR_DIE(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        cublasLtMatrixLayout_t l;
        LT_OR_DIE(cublasLtMatrixLayoutCreate(&l, cuda_type(c.t), 1, 1, 1));
        const float beta = 0.0f;
        LT_OR_DIE(cublasLtMatmul(f.lt, desc, &c.alpha, da.ptr, l, db.ptr, l, &beta, dd.ptr, l,
                                 dd.ptr, l, nullptr, nullptr, 0, f.stream));
        CUDA_OR_DIE(cudaStreamSynchronize(f.stream));
        uint16_t got = 0;
        CUDA_OR_DIE(cudaMemcpy(&got, dd.ptr, 2, cudaMemcpyDeviceToHost));
        if (got != c.want) {
            fail("%s: bits 0x%04x, expected 0x%04x", c.what, got, c.want);
            all = false;
        }
        cublasLtMatmulDescDestroy(desc);
        cublasLtMatrixLayoutDestroy(l);
        release(da);
        release(db);
        release(dd);
    }
    if (all)
        ok("f32 results round to nearest even into bf16 and f16 D");
}

/* ---- the API around the computation ------------------------------------------------------ */

void test_api(const fixture &f)
{
    bool all = true;
    auto expect = [&all](bool cond, const char *what) {
        if (!cond) {
            fail("api: %s", what);
            all = false;
        }
    };
    expect(cublasLtGetVersion() == CUBLAS_VERSION, "cublasLtGetVersion is the header's");
    expect(strcmp(cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED),
                  "CUBLAS_STATUS_NOT_SUPPORTED") == 0, "cublasLtGetStatusName");
    expect(cublasLtGetStatusString(CUBLAS_STATUS_INVALID_VALUE) != nullptr,
           "cublasLtGetStatusString");

    cublasLtMatmulDesc_t desc;
    LT_OR_DIE(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    uint32_t epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS, back = 0;
    size_t written = 0;
    expect(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                          sizeof epilogue) == CUBLAS_STATUS_SUCCESS, "set epilogue");
    expect(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, nullptr, 0,
                                          &written) == CUBLAS_STATUS_SUCCESS && written == 4,
           "size query of EPILOGUE");
    expect(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &back,
                                          sizeof back, &written) == CUBLAS_STATUS_SUCCESS &&
               back == epilogue, "get epilogue back");
    int64_t wrong_size = 0;
    expect(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &wrong_size,
                                          sizeof wrong_size) == CUBLAS_STATUS_INVALID_VALUE,
           "an attribute of the wrong size is INVALID_VALUE");
    expect(cublasLtMatmulDescSetAttribute(desc, (cublasLtMatmulDescAttributes_t)9, &epilogue,
                                          sizeof epilogue) == CUBLAS_STATUS_INVALID_VALUE,
           "an unknown descriptor attribute is INVALID_VALUE");
    int32_t order = 0;
    cublasLtMatrixLayout_t l;
    LT_OR_DIE(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 4, 4, 4));
    expect(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &order,
                                            sizeof order, &written) == CUBLAS_STATUS_SUCCESS &&
               order == CUBLASLT_ORDER_COL, "a layout's default order is column-major");
    expect(cublasLtMatrixLayoutSetAttribute(l, (cublasLtMatrixLayoutAttribute_t)99, &order,
                                            sizeof order) == CUBLAS_STATUS_INVALID_VALUE,
           "an unknown layout attribute is INVALID_VALUE");
    cublasLtMatrixLayoutDestroy(l);
    cublasLtMatmulDescDestroy(desc);
    (void)f;
    if (all)
        ok("version, status names, attribute get/set and their refusals");
}

/* A small f32 column-major matmul whose parts each negative check spoils one at a time. */
struct small_call {
    const fixture *f;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    device_buffer a, b, d, bias;
    float alpha = 1.0f, beta = 0.0f;
    const void *a_ptr = nullptr;

    explicit small_call(const fixture &fx, int64_t lda = 8) : f(&fx)
    {
        a = upload(F32, std::vector<float>(64, 0.5f));
        b = upload(F32, std::vector<float>(64, 0.25f));
        d = upload(F32, std::vector<float>(64, 0.0f));
        bias = upload(F32, std::vector<float>(8, 1.0f));
        a_ptr = a.ptr;
        LT_OR_DIE(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        LT_OR_DIE(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, 8, 8, lda));
        LT_OR_DIE(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, 8, 8, 8));
        LT_OR_DIE(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, 8, 8, 8));
    }
    ~small_call()
    {
        cublasLtMatmulDescDestroy(desc);
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutDestroy(ld);
        release(a);
        release(b);
        release(d);
        release(bias);
    }
    cublasStatus_t heuristic(cublasLtMatmulAlgo_t *algo, cublasLtMatmulPreference_t pref = nullptr)
    {
        cublasLtMatmulHeuristicResult_t r;
        int found = 0;
        cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(f->lt, desc, la, lb, ld, ld, pref, 1,
                                                           &r, &found);
        if (st == CUBLAS_STATUS_SUCCESS && found == 1 && algo)
            *algo = r.algo;
        return st;
    }
    cublasStatus_t run(const cublasLtMatmulAlgo_t *algo = nullptr)
    {
        cublasStatus_t st = cublasLtMatmul(f->lt, desc, &alpha, a_ptr, la, b.ptr, lb, &beta,
                                           d.ptr, ld, d.ptr, ld, algo, f->workspace.ptr,
                                           f->workspace.bytes, f->stream);
        CUDA_OR_DIE(cudaStreamSynchronize(f->stream));
        return st;
    }
};

void test_refusals(const fixture &f)
{
    bool all = true;
    auto expect = [&all](cublasStatus_t got, cublasStatus_t want, const char *what) {
        if (got != want) {
            fail("refusal: %s: %s, expected %s", what, cublasLtGetStatusName(got),
                 cublasLtGetStatusName(want));
            all = false;
        }
    };
    printf("(the refusals below print their reasons on stderr)\n");
    {
        small_call c(f);
        expect(c.run(), CUBLAS_STATUS_SUCCESS, "the unspoilt call");
    }
    {
        small_call c(f, 7);   // 8 rows, ld 7
        expect(c.heuristic(nullptr), CUBLAS_STATUS_INVALID_VALUE, "heuristic: ld < rows");
        expect(c.run(), CUBLAS_STATUS_INVALID_VALUE, "matmul: ld < rows");
    }
    {
        small_call c(f);
        int32_t row = CUBLASLT_ORDER_ROW;
        uint32_t bias_epilogue = CUBLASLT_EPILOGUE_BIAS;
        for (cublasLtMatrixLayout_t l : {c.la, c.lb, c.ld})
            LT_OR_DIE(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &row,
                                                       sizeof row));
        set_desc(c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &bias_epilogue, sizeof bias_epilogue);
        set_desc(c.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &c.bias.ptr, sizeof c.bias.ptr);
        expect(c.heuristic(nullptr), CUBLAS_STATUS_NOT_SUPPORTED, "heuristic: BIAS with a row-order D");
        expect(c.run(), CUBLAS_STATUS_NOT_SUPPORTED, "matmul: BIAS with a row-order D");
    }
    {
        small_call c(f);
        std::vector<float> host(64, 1.0f);
        c.a_ptr = host.data();
        expect(c.run(), CUBLAS_STATUS_INVALID_VALUE, "a host pointer as A");
        c.a_ptr = (const char *)c.a.ptr + 4 * 8;   // 64 floats from the 9th: 8 too few
        expect(c.run(), CUBLAS_STATUS_INVALID_VALUE, "A past its allocation's end");
        c.a_ptr = c.a.ptr;
        const void *device_alpha = c.d.ptr;
        expect(cublasLtMatmul(f.lt, c.desc, device_alpha, c.a.ptr, c.la, c.b.ptr, c.lb, &c.beta,
                              c.d.ptr, c.ld, c.d.ptr, c.ld, nullptr, nullptr, 0, f.stream),
               CUBLAS_STATUS_INVALID_VALUE, "a device alpha in host pointer mode");
        expect(cublasLtMatmul(f.lt, c.desc, &c.alpha, c.a.ptr, c.la, c.b.ptr, c.lb, &c.beta,
                              c.d.ptr, c.ld, c.d.ptr, c.ld, nullptr,
                              (char *)f.workspace.ptr + 16, 1024, f.stream),
               CUBLAS_STATUS_INVALID_VALUE, "a workspace not 256-byte aligned");
    }
    {
        /* A 4 bytes into its allocation: the heuristic must have been told */
        small_call c(f);
        device_buffer big = upload(F32, std::vector<float>(65, 0.5f));
        cublasLtMatmulAlgo_t algo;
        expect(c.heuristic(&algo), CUBLAS_STATUS_SUCCESS, "heuristic, default alignments");
        c.a_ptr = (const char *)big.ptr + 4;
        expect(c.run(&algo), CUBLAS_STATUS_INVALID_VALUE,
               "A 4-byte aligned with an algorithm chosen for 256");
        cublasLtMatmulPreference_t pref;
        LT_OR_DIE(cublasLtMatmulPreferenceCreate(&pref));
        uint32_t four = 4;
        LT_OR_DIE(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                       &four, sizeof four));
        expect(c.heuristic(&algo, pref), CUBLAS_STATUS_SUCCESS, "heuristic told 4 bytes");
        expect(c.run(&algo), CUBLAS_STATUS_SUCCESS, "A 4-byte aligned, heuristic told");
        uint32_t two = 2;
        LT_OR_DIE(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                       &two, sizeof two));
        expect(c.heuristic(&algo, pref), CUBLAS_STATUS_NOT_SUPPORTED,
               "heuristic: f32 A aligned to 2 bytes");
        cublasLtMatmulPreferenceDestroy(pref);
        release(big);
    }
    {
        small_call c(f);
        uint32_t e = CUBLASLT_EPILOGUE_RELU_AUX;
        set_desc(c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
        expect(c.run(), CUBLAS_STATUS_NOT_SUPPORTED, "RELU_AUX (a bit mask)");
        e = CUBLASLT_EPILOGUE_GELU_AUX;
        int64_t aux_ld = 12;   // >= 8 rows, not a multiple of 8
        set_desc(c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
        set_desc(c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &c.bias.ptr, sizeof c.bias.ptr);
        set_desc(c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld);
        expect(c.heuristic(nullptr), CUBLAS_STATUS_INVALID_VALUE, "heuristic: aux ld 12");
        expect(c.run(), CUBLAS_STATUS_INVALID_VALUE, "matmul: aux ld 12");
        aux_ld = 8;
        set_desc(c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld);
        expect(c.run(), CUBLAS_STATUS_INVALID_VALUE, "an aux buffer of 8 floats for 8 x 8");
    }
    {
        small_call c(f);
        int32_t compute = CUBLAS_COMPUTE_16F;
        set_desc(c.desc, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &compute, sizeof compute);
        expect(c.run(), CUBLAS_STATUS_NOT_SUPPORTED, "CUBLAS_COMPUTE_16F");
        compute = CUBLAS_COMPUTE_32F_FAST_TF32;
        set_desc(c.desc, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &compute, sizeof compute);
        uint32_t bf16 = CUDA_R_16BF;
        for (cublasLtMatrixLayout_t l : {c.la, c.lb})
            LT_OR_DIE(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_TYPE, &bf16,
                                                       sizeof bf16));
        expect(c.run(), CUBLAS_STATUS_NOT_SUPPORTED, "FAST_TF32 with bf16 A and B");
    }
    {
        small_call c(f);
        cublasLtMatmulDesc_t gone;
        LT_OR_DIE(cublasLtMatmulDescCreate(&gone, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        cublasLtMatmulDescDestroy(gone);
        expect(cublasLtMatmul(f.lt, gone, &c.alpha, c.a.ptr, c.la, c.b.ptr, c.lb, &c.beta,
                              c.d.ptr, c.ld, c.d.ptr, c.ld, nullptr, nullptr, 0, f.stream),
               CUBLAS_STATUS_INVALID_VALUE, "a destroyed descriptor");
        expect(cublasLtMatmul(nullptr, c.desc, &c.alpha, c.a.ptr, c.la, c.b.ptr, c.lb, &c.beta,
                              c.d.ptr, c.ld, c.d.ptr, c.ld, nullptr, nullptr, 0, f.stream),
               CUBLAS_STATUS_NOT_INITIALIZED, "a NULL handle");
        int32_t two = 2;
        LT_OR_DIE(cublasLtMatrixLayoutSetAttribute(c.la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &two,
                                                   sizeof two));
        expect(c.run(), CUBLAS_STATUS_INVALID_VALUE, "batch counts that differ");
    }
    {
        small_call c(f);
        cublasLtMatrixLayout_t lc;   // C == D in memory, but described with another ld
        LT_OR_DIE(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, 8, 8, 8));
        int64_t ld = 9;
        LT_OR_DIE(cublasLtMatrixLayoutSetAttribute(lc, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof ld));
        device_buffer cd = upload(F32, std::vector<float>(128, 0.0f));
        expect(cublasLtMatmul(f.lt, c.desc, &c.alpha, c.a.ptr, c.la, c.b.ptr, c.lb, &c.beta,
                              cd.ptr, lc, cd.ptr, c.ld, nullptr, nullptr, 0, f.stream),
               CUBLAS_STATUS_INVALID_VALUE, "C == D with different leading dimensions");
        cublasLtMatrixLayoutDestroy(lc);
        release(cd);
        uint32_t e = CUBLASLT_EPILOGUE_BIAS;
        int32_t bf16 = CUDA_R_16BF;
        set_desc(c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
        set_desc(c.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &c.bias.ptr, sizeof c.bias.ptr);
        set_desc(c.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bf16, sizeof bf16);
        expect(c.run(), CUBLAS_STATUS_NOT_SUPPORTED, "a bf16 bias with an f32 D");
        e = CUBLASLT_EPILOGUE_GELU_AUX;
        int64_t aux_ld = 8;
        set_desc(c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
        set_desc(c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &c.a.ptr, sizeof c.a.ptr);
        set_desc(c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld);
        set_desc(c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &bf16, sizeof bf16);
        expect(c.run(), CUBLAS_STATUS_INVALID_VALUE, "a bf16 aux with an f32 D");
        e = CUBLASLT_EPILOGUE_DGELU;
        set_desc(c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
        void *no_aux = nullptr;
        int32_t default_type = -1;
        set_desc(c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &default_type,
                 sizeof default_type);
        set_desc(c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &no_aux, sizeof no_aux);
        expect(c.run(), CUBLAS_STATUS_INVALID_VALUE, "DGELU without an aux pointer");
    }
    if (all)
        ok("refusals: ld < rows, bias on row-order D, host / short / misaligned pointers, "
           "unsupported epilogue and types, destroyed descriptor, C == D described twice, "
           "bias and aux types, missing aux");
}

/* The call's values are read when cublasLtMatmul is called, not when the work runs. */
void test_capture_at_call_time(const fixture &f)
{
    small_call c(f);
    c.alpha = 2.0f;
    cublasStatus_t st = cublasLtMatmul(f.lt, c.desc, &c.alpha, c.a.ptr, c.la, c.b.ptr, c.lb,
                                       &c.beta, c.d.ptr, c.ld, c.d.ptr, c.ld, nullptr,
                                       f.workspace.ptr, f.workspace.bytes, f.stream);
    c.alpha = 100.0f;
    uint32_t e = CUBLASLT_EPILOGUE_GELU;   // gelu(2) would be 1.95
    set_desc(c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
    uint64_t one_row = 1;
    LT_OR_DIE(cublasLtMatrixLayoutSetAttribute(c.ld, CUBLASLT_MATRIX_LAYOUT_ROWS, &one_row,
                                               sizeof one_row));
    CUDA_OR_DIE(cudaStreamSynchronize(f.stream));
    std::vector<float> d = download(F32, c.d);
    /* 2 * sum over 8 of 0.5 * 0.25 = 2 */
    bool good = st == CUBLAS_STATUS_SUCCESS;
    for (float x : d)
        good = good && x == 2.0f;
    if (good)
        ok("alpha and descriptor are read at call time (changed before the work ran)");
    else
        fail("capture: status %d, D[0] = %g, expected 2", (int)st, (double)d[0]);
}

/* ---- oneDNN ----------------------------------------------------------------------------- */

#ifdef GB_TEST_HAVE_DNNL
void test_against_dnnl(const fixture &f)
{
    int passed = 0, total = 0;
    uint64_t seed = 5000;
    for (int trans = 0; trans < 4; trans++)
        for (float beta : {0.0f, 0.5f}) {
            const bool ta = trans & 1, tb = trans & 2;
            const int64_t m = 37 + trans, n = 29, k = 61 + 40 * trans;
            rng r{seed++};
            const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, lda = a_rows + 2;
            const int64_t b_rows = tb ? n : k, b_cols = tb ? k : n, ldb = b_rows + 1;
            const int64_t ldd = m + 3;
            std::vector<float> a = random_values(F32, (size_t)(lda * a_cols), r, -1, 1);
            std::vector<float> b = random_values(F32, (size_t)(ldb * b_cols), r, -1, 1);
            std::vector<float> d = random_values(F32, (size_t)(ldd * n), r, -1, 1);
            std::vector<float> want = d;
            const float alpha = 1.5f;
            /* dnnl is row-major: D^T (n x m) = op(B)^T op(A)^T */
            dnnl_sgemm(tb ? 'T' : 'N', ta ? 'T' : 'N', n, m, k, alpha, b.data(), ldb, a.data(),
                       lda, beta, want.data(), ldd);
            device_buffer da = upload(F32, a), db = upload(F32, b), dd = upload(F32, d);
            cublasLtMatmulDesc_t desc;
            LT_OR_DIE(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
            int32_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
            set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa);
            set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb);
            cublasLtMatrixLayout_t la, lb, ld;
            LT_OR_DIE(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, a_rows, a_cols, lda));
            LT_OR_DIE(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, b_rows, b_cols, ldb));
            LT_OR_DIE(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, ldd));
            LT_OR_DIE(cublasLtMatmul(f.lt, desc, &alpha, da.ptr, la, db.ptr, lb, &beta, dd.ptr,
                                     ld, dd.ptr, ld, nullptr, f.workspace.ptr, f.workspace.bytes,
                                     f.stream));
            CUDA_OR_DIE(cudaStreamSynchronize(f.stream));
            std::vector<float> got = download(F32, dd);
            /* both sum in f32 in their own orders: each within (k + 2) 2^-24 sum|ab| */
            bool good = true;
            for (int64_t j = 0; j < n && good; j++)
                for (int64_t i = 0; i < m && good; i++) {
                    double sum_abs = 0.0;
                    for (int64_t q = 0; q < k; q++)
                        sum_abs += std::fabs((double)a[ta ? q + i * lda : i + q * lda] *
                                             b[tb ? j + q * ldb : q + j * ldb]);
                    const double tol = 2.0 * (k + 4) * 0x1p-24 * (alpha * sum_abs + 1.0);
                    const double g = got[i + j * ldd], w = want[i + j * ldd];
                    if (!(std::fabs(g - w) <= tol)) {
                        fail("dnnl_sgemm %c%c m=%" PRId64 " n=%" PRId64 " k=%" PRId64 " beta=%g: "
                             "D(%" PRId64 ", %" PRId64 ") = %.9g, oneDNN %.9g", ta ? 'T' : 'N',
                             tb ? 'T' : 'N', m, n, k, (double)beta, i, j, g, w);
                        good = false;
                    }
                }
            for (size_t x = 0; x < got.size() && good; x++)
                if ((int64_t)(x % ldd) >= m && got[x] != d[x]) {
                    fail("dnnl comparison: padding of D changed at %zu", x);
                    good = false;
                }
            passed += good;
            total++;
            cublasLtMatmulDescDestroy(desc);
            cublasLtMatrixLayoutDestroy(la);
            cublasLtMatrixLayoutDestroy(lb);
            cublasLtMatrixLayoutDestroy(ld);
            release(da);
            release(db);
            release(dd);
        }
    if (passed == total)
        ok("f32 products match oneDNN's dnnl_sgemm (%d cases, transposes, alpha, beta)", total);
}
#endif

/* ---- the thread count --------------------------------------------------------------------- */

/* FNV-1a of the bits of a few larger products, for the runs with other thread counts. */
uint64_t digest(const fixture &f)
{
    uint64_t h = 1469598103934665603ull;
    for (const type_pair &tp : kTypePairs) {
        spec s = typed(tp);
        s.m = 67;
        s.n = 45;
        s.k = 301;
        s.batch = 2;
        s.ta = true;
        s.epilogue = CUBLASLT_EPILOGUE_DGELU_BGRAD;
        const epilogue_info &ep = epilogue_named(s.epilogue);
        problem p = make_problem(s, ep);
        device_buffer a = upload(s.ab, p.a), b = upload(s.ab, p.b), d = upload(s.cd, p.d0);
        device_buffer vec = upload(s.cd, p.vec0), aux = upload(s.cd, p.aux0);
        cublasLtMatmulDesc_t desc;
        LT_OR_DIE(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        int32_t op = CUBLAS_OP_T;
        set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op, sizeof op);
        set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &s.epilogue, sizeof s.epilogue);
        set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vec.ptr, sizeof vec.ptr);
        set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &p.vec_stride, sizeof p.vec_stride);
        set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux.ptr, sizeof aux.ptr);
        set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &p.laux.ld, sizeof p.laux.ld);
        set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &p.laux.stride,
                 sizeof p.laux.stride);
        cublasLtMatrixLayout_t la = make_layout(p.la, s.batch), lb = make_layout(p.lb, s.batch);
        cublasLtMatrixLayout_t ld = make_layout(p.ld, s.batch);
        const float alpha = 1.0f, beta = 0.0f;
        LT_OR_DIE(cublasLtMatmul(f.lt, desc, &alpha, a.ptr, la, b.ptr, lb, &beta, d.ptr, ld,
                                 d.ptr, ld, nullptr, f.workspace.ptr, f.workspace.bytes, f.stream));
        CUDA_OR_DIE(cudaStreamSynchronize(f.stream));
        for (const device_buffer *buf : {&d, &vec}) {
            std::vector<unsigned char> raw(buf->bytes);
            CUDA_OR_DIE(cudaMemcpy(raw.data(), buf->ptr, buf->bytes, cudaMemcpyDeviceToHost));
            for (unsigned char byte : raw)
                h = (h ^ byte) * 1099511628211ull;
        }
        cublasLtMatmulDescDestroy(desc);
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutDestroy(ld);
        for (device_buffer *buf : {&a, &b, &d, &vec, &aux})
            release(*buf);
    }
    return h;
}

void test_thread_count(const fixture &f)
{
    const uint64_t here = digest(f);
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        printf("skip: thread-count independence (no /proc/self/exe)\n");
        return;
    }
    self[len] = '\0';
    bool all = true;
    for (int threads : {1, 3}) {
        std::string cmd = "OMP_NUM_THREADS=" + std::to_string(threads) + " '" + self +
                          "' --digest 2>/dev/null";
        FILE *child = popen(cmd.c_str(), "r");
        unsigned long long theirs = 0;
        const bool read = child && fscanf(child, "digest %llx", &theirs) == 1;
        const int status = child ? pclose(child) : -1;
        if (!read || status != 0) {
            fail("thread count: could not run %s", cmd.c_str());
            all = false;
        } else if (theirs != here) {
            fail("thread count: OMP_NUM_THREADS=%d gives digest %016llx, this run %016llx",
                 threads, theirs, (unsigned long long)here);
            all = false;
        }
    }
    if (all)
        ok("same bits with OMP_NUM_THREADS=1, 3 and the default");
}

}  // namespace

int main(int argc, char **argv)
{
    fixture f;
    LT_OR_DIE(cublasLtCreate(&f.lt));
    CUDA_OR_DIE(cudaStreamCreate(&f.stream));
    f.workspace.bytes = 1 << 20;
    CUDA_OR_DIE(cudaMalloc(&f.workspace.ptr, f.workspace.bytes));

    if (argc > 1 && strcmp(argv[1], "--digest") == 0) {
        printf("digest %016llx\n", (unsigned long long)digest(f));
        return 0;
    }

    test_api(f);
    test_exact_rounding(f);
    test_output_rounding(f);
    test_epilogues(f);
    test_row_order(f);
    test_batches_and_sizes(f);
    test_scalars_and_in_place(f);
    test_fast_compute(f);
    test_capture_at_call_time(f);
    test_refusals(f);
#ifdef GB_TEST_HAVE_DNNL
    test_against_dnnl(f);
#else
    printf("skip: comparison with oneDNN's dnnl_sgemm (built without oneDNN)\n");
#endif
    test_thread_count(f);

    release(f.workspace);
    CUDA_OR_DIE(cudaStreamDestroy(f.stream));
    LT_OR_DIE(cublasLtDestroy(f.lt));
    if (failures) {
        printf("%d failure(s)\n", failures);
        return 1;
    }
    return 0;
}
