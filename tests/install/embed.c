/* A third program on the installed engine: built out of tree with
 * `pkg-config --cflags --libs gearbox-engine` alone, it opens a run from the config file
 * it is given, trains `steps` optimizer steps and prints the loss of each, read through
 * the API, then evaluates and saves the checkpoint of the last step. Exit status 0 when
 * every step ran, every loss is finite and the checkpoint was written.
 * usage: embed CONFIG STEPS */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <gearbox/engine.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: embed CONFIG STEPS\n");
        return 2;
    }
    const long steps = strtol(argv[2], NULL, 10);
    gb_diag diag = {0};
    gb_config *cfg = gb_config_load(argv[1], &diag);
    gb_diag_print(&diag, stderr);
    gb_diag_clear(&diag);
    gb_trainer *t = cfg ? gb_trainer_open(cfg, NULL) : NULL;
    int failed = !t;
    for (long it = 0; !failed && it < steps; it++) {
        float loss = NAN;
        failed = gb_trainer_step(t, it, &loss) != 0 || !isfinite(loss);
        printf("step %ld loss %.4f\n", it + 1, loss);
    }
    double train_loss = NAN, val_loss = NAN;
    if (!failed && !(failed = gb_trainer_evaluate(t, steps, &train_loss, &val_loss) != 0 ||
                              !isfinite(train_loss) || !isfinite(val_loss)))
        printf("eval train %.4f val %.4f\n", train_loss, val_loss);
    failed = failed || gb_trainer_save(t, steps) != 0;
    gb_trainer_close(t);
    gb_config_free(cfg);
    return failed;
}
