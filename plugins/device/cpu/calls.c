/* What the CPU device's entry points share: failing with a message, checking a kernel's
 * dtype and sizes, and the scratch memory kernels grow on demand. Apart from
 * device_cpu.c so that matmul.c, queue.c and the kernels' files, which call these, and
 * device_cpu.c, which calls them, depend on this file rather than on each other. */
#include <stdarg.h>
#include <stdio.h>

#include "cpu_device.h"

gb_status cpu_fail(cpu_device *dev, gb_status status, const char *fmt, ...)
{
    char message[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    dev->host->set_error(dev->host, "%s", message);
    return status;
}

gb_status cpu_check_call(cpu_device *dev, const char *kernel, gb_dtype dtype, int64_t rows,
                         int64_t cols)
{
    if (!dtype_is_activation(dtype))
        return cpu_fail(dev, GB_ERR_UNSUPPORTED,
                        "%s on the cpu device takes f32, bf16 or f16 activations; this call "
                        "asks for %s", kernel, gb_dtype_name(dtype));
    if (rows < 0 || cols < 0)
        return cpu_fail(dev, GB_ERR_INVALID_ARG, "%s: negative size (%lld, %lld)", kernel,
                        (long long)rows, (long long)cols);
    return GB_OK;
}

double *cpu_scratch(cpu_device *dev, const char *kernel, size_t count)
{
    if (count <= dev->scratch_count)
        return dev->scratch;
    double *grown = dev->host->alloc(dev->host, count * sizeof(double));
    if (!grown) {
        cpu_fail(dev, GB_ERR_NO_MEMORY, "%s: cannot allocate %zu bytes of scratch", kernel,
                 count * sizeof(double));
        return NULL;
    }
    dev->host->free(dev->host, dev->scratch);
    dev->scratch = grown;
    dev->scratch_count = count;
    return grown;
}

gb_status cpu_row_scratch(cpu_device *dev, const char *kernel, gb_dtype dtype, int64_t floats,
                          float **rows)
{
    *rows = NULL;
    if (dtype == GB_F32)
        return GB_OK;
    if (floats > dev->row_floats) {
        const size_t bytes = (size_t)dev->threads * (size_t)floats * sizeof(float);
        float *grown = dev->host->alloc(dev->host, bytes);
        if (!grown)
            return cpu_fail(dev, GB_ERR_NO_MEMORY, "%s: cannot allocate %zu bytes of %s "
                            "widening rows", kernel, bytes, gb_dtype_name(dtype));
        dev->host->free(dev->host, dev->rows);
        dev->rows = grown;
        dev->row_floats = floats;
    }
    *rows = dev->rows;
    return GB_OK;
}

gb_status cpu_check_rows(cpu_device *dev, const char *kernel, gb_dtype dtype, int64_t rows,
                         int64_t cols, int64_t floats, float **scratch)
{
    gb_status status = cpu_check_call(dev, kernel, dtype, rows, cols);
    return status == GB_OK ? cpu_row_scratch(dev, kernel, dtype, floats, scratch) : status;
}
