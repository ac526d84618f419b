/* Compares the parameters of two checkpoints element by element.
 *
 * Usage: compare_params A.gbk B.gbk TOLERANCE
 * Prints the largest absolute difference and where it is, and exits 0 when every
 * |a - b| <= TOLERANCE, 1 when one is not, 2 when a file cannot be read or the models
 * differ in size.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "checkpoint.h"

static int read_checkpoint(const char *path, gb_checkpoint *ck)
{
    gb_diag diag = {0};
    int rc = gb_checkpoint_read(path, ck, &diag);
    gb_diag_print(&diag, stderr);
    gb_diag_clear(&diag);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: compare_params A.gbk B.gbk TOLERANCE\n");
        return 2;
    }
    double tolerance = atof(argv[3]);
    gb_checkpoint a, b;
    if (read_checkpoint(argv[1], &a))
        return 2;
    if (read_checkpoint(argv[2], &b)) {
        gb_checkpoint_free(&a);
        return 2;
    }
    int rc = 2;
    if (a.n_params != b.n_params) {
        fprintf(stderr, "%s has %lld parameters, %s has %lld\n", argv[1],
                (long long)a.n_params, argv[2], (long long)b.n_params);
    } else {
        double worst = 0.0;
        int64_t where = 0;
        for (int64_t i = 0; i < a.n_params; i++) {
            double d = fabs((double)a.params[i] - (double)b.params[i]);
            if (!(d <= worst)) { /* also catches NaN */
                worst = d;
                where = i;
            }
        }
        printf("step %lld vs %lld: %lld parameters, largest difference %.3g at element %lld "
               "(%.9g vs %.9g)\n", (long long)a.step, (long long)b.step, (long long)a.n_params,
               worst, (long long)where, a.params[where], b.params[where]);
        rc = worst <= tolerance ? 0 : 1;
    }
    gb_checkpoint_free(&a);
    gb_checkpoint_free(&b);
    return rc;
}
