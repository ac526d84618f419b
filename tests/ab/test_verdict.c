/* Tests of what `gearbox ab` reads and says (tools/ab/metrics.c, tools/ab/verdict.c) on
 * synthetic runs: the metrics.jsonl reader with and without the summary line, and its
 * refusal of a line that is not JSON (with line and column), step-time figures with
 * warm-up steps left out, the speed ratio from paired repeats and from one repeat, the loss comparison (identical
 * curves, tiny differences, a different learning rate) and the sentence under the table.
 *
 *   test_verdict SCRATCH_DIR     metrics files are written there
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ab/metrics.h"
#include "ab/verdict.h"

/* ---- synthetic runs ------------------------------------------------------------------ */

enum { STEPS = 20, WARMUP = 4 };

/* A run of STEPS steps taking about `ms` each (ten times that during warm-up, which must
 * not count), with the loss 4 - 0.1 * step, plus `bump` at step `at`. */
static gb_ab_run make_run(double ms, double bump, int64_t at, double val_loss)
{
    gb_ab_run run = gb_ab_run_empty();
    run.steps = calloc(STEPS, sizeof *run.steps);
    run.n_steps = STEPS;
    for (int i = 0; i < STEPS; i++) {
        int64_t step = i + 1;
        double t = ms * (step <= WARMUP ? 10.0 : 1.0 + 0.01 * (i % 3));
        run.steps[i] = (gb_ab_step){step, 4.0 - 0.1 * (double)step + (step == at ? bump : 0),
                                    t, 1000.0 * 64 / t, NAN};
    }
    run.train_loss = 2.5;
    run.val_loss = val_loss;
    return run;
}

/* ---- reading ------------------------------------------------------------------------- */

/* Writes `text` to DIR/NAME, whose path goes into path[4096]: 0, or -1. */
static int write_file(char *path, const char *dir, const char *name, const char *text)
{
    snprintf(path, 4096, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f);
}

/* Evaluations along a run: each is listed, and the first at or below a target gives the
 * steps and the logged steps' seconds to it. */
static void check_reach(const char *dir)
{
    /* steps of 100, 200, 300 and 400 ms; evaluations after steps 2 and 4 */
    const char *text = "{\"step\": 1, \"loss\": 4.2, \"ms\": 100}\n{\"step\": 2, \"loss\": 4.1, "
                       "\"ms\": 200}\n{\"step\": 2, \"train_loss\": 3.1, \"val_loss\": 3.0}\n"
                       "{\"step\": 3, \"loss\": 3.9, \"ms\": 300}\n{\"step\": 4, \"loss\": 3.8, "
                       "\"ms\": 400}\n{\"step\": 4, \"train_loss\": 2.6, \"val_loss\": 2.5}\n";
    char path[4096], err[8192] = "";
    gb_ab_run run = gb_ab_run_empty();
    CHECK(write_file(path, dir, "evals.jsonl", text) == 0 &&
          gb_ab_run_read(path, &run, err, sizeof err) == 0);
    CHECK(run.n_steps == 4 && run.n_evals == 2);
    if (run.n_evals == 2)
        CHECK(run.evals[0].step == 2 && run.evals[0].val_loss == 3.0 &&
              run.evals[1].step == 4 && run.evals[1].val_loss == 2.5);
    CHECK(run.val_loss == 2.5 && run.train_loss == 2.6);
    gb_ab_reach r = gb_ab_reach_of(&run, 3.0);   /* "at or below": the first evaluation */
    CHECK(r.reached && r.step == 2 && fabs(r.seconds - 0.3) < 1e-12);
    r = gb_ab_reach_of(&run, 2.6);
    CHECK(r.reached && r.step == 4 && fabs(r.seconds - 1.0) < 1e-12);
    r = gb_ab_reach_of(&run, 2.4);
    CHECK(!r.reached);
    gb_ab_run_free(&run);
    CHECK(run.n_evals == 0 && !run.evals);
}

static void check_reader(const char *dir)
{
    char path[4096];
    CHECK(write_file(path, dir, "with_summary.jsonl",
        "{\"step\": 1, \"loss\": 4.2, \"lr\": 0.001, \"ms\": 35.5, \"tokens_per_s\": 1234.5, "
        "\"grad_norm\": 0.5, \"mfu\": 0.25}\n"
        "{\"step\": 2, \"loss\": 4.1, \"lr\": 0.001, \"ms\": 30, \"tokens_per_s\": 1500, "
        "\"grad_norm\": 0.4, \"mfu\": 0.3}\n"
        "{\"step\": 2, \"train_loss\": 4.05, \"val_loss\": 4.07}\n"
        "{\"summary\": true, \"peak_rss_bytes\": 1048576, \"planned_bytes\": {\"params\": 10, "
        "\"grads\": 20, \"optimizer\": 30, \"activations\": 40, \"workspace\": 50}}\n") == 0);
    gb_ab_run run = gb_ab_run_empty();
    char err[8192] = "";
    CHECK(gb_ab_run_read(path, &run, err, sizeof err) == 0);
    CHECK(run.n_steps == 2);
    if (run.n_steps == 2) {
        CHECK(run.steps[0].step == 1 && run.steps[0].loss == 4.2 && run.steps[0].ms == 35.5);
        CHECK(run.steps[0].tokens_per_s == 1234.5 && run.steps[1].mfu == 0.3);
    }
    CHECK(run.train_loss == 4.05 && run.val_loss == 4.07);
    CHECK(run.peak_rss_bytes == 1048576);
    CHECK(run.planned_bytes[GB_AB_MEM_PARAMS] == 10 &&
          run.planned_bytes[GB_AB_MEM_WORKSPACE] == 50);
    CHECK(gb_ab_planned_total(&run) == 150);

    /* a run without the summary (stopped early) and a null MFU (no peak known): memory
     * figures and MFU stay unknown; a "loss" inside another key is not the loss */
    CHECK(write_file(path, dir, "plain.jsonl",
        "{\"step\": 1, \"loss\": 4.2, \"lr\": 0.001, \"ms\": 35.5, \"tokens_per_s\": 1234.5, "
        "\"grad_norm\": 0.5, \"mfu\": null}\n"
        "\n"
        "{\"step\": 1, \"train_loss\": 3.5, \"val_loss\": 3.25}\n") == 0);
    CHECK(gb_ab_run_read(path, &run, err, sizeof err) == 0);
    CHECK(run.n_steps == 1 && isnan(run.steps[0].mfu) && run.steps[0].loss == 4.2);
    CHECK(run.train_loss == 3.5 && run.val_loss == 3.25);
    CHECK(isnan(run.peak_rss_bytes) && isnan(gb_ab_planned_total(&run)));
    gb_ab_run_free(&run);

    /* a broken line is named with its line and column, and nothing is read */
    CHECK(write_file(path, dir, "broken.jsonl",
        "{\"step\": 1, \"loss\": 4.2, \"ms\": 35.5}\n"
        "{\"step\": 2, \"loss\": 4.1, \"ms\": }\n") == 0);
    CHECK(gb_ab_run_read(path, &run, err, sizeof err) == -1);
    char want[4200];
    snprintf(want, sizeof want, "%s:2:", path);
    CHECK(strncmp(err, want, strlen(want)) == 0 && strstr(err, "unexpected token"));
    printf("broken line: %s\n", err);
    CHECK(run.n_steps == 0);

    /* a known field of the wrong type */
    CHECK(write_file(path, dir, "broken.jsonl",
                     "{\"step\": 1, \"loss\": \"low\", \"ms\": 35.5}\n") == 0);
    CHECK(gb_ab_run_read(path, &run, err, sizeof err) == -1 && strstr(err, ":1: \"loss\" is not"));

    snprintf(path, sizeof path, "%s/absent.jsonl", dir);
    CHECK(gb_ab_run_read(path, &run, err, sizeof err) == -1 && strstr(err, "No such file"));
    check_reach(dir);
}

/* ---- figures ------------------------------------------------------------------------- */

static void check_timing_and_speed(void)
{
    gb_ab_run base[3], fast[3];
    for (int r = 0; r < 3; r++) {
        double drift = 1.0 + 0.2 * r;   /* the machine slows down from repeat to repeat */
        base[r] = make_run(40.0 * drift, 0, 0, 3.0);
        fast[r] = make_run(20.0 * drift, 0, 0, 3.0);
    }
    gb_ab_timing t = gb_ab_timing_of(base, 1, WARMUP);
    CHECK(t.ms.n == STEPS - WARMUP);
    CHECK_NEAR(t.ms.median, 40.4, 1e-9);   /* warm-up steps (400 ms) left out */
    CHECK(t.ms.max < 41 && isnan(t.mfu));
    CHECK_NEAR(t.tokens_per_s, 64.0 / 40.4e-3, 1e-6);   /* 64 tokens at the median step time */

    gb_ab_speed s = gb_ab_speed_of(base, fast, 3, WARMUP);
    printf("paired repeats, 2x: %.4f (%.4f-%.4f)\n", s.ratio.estimate, s.ratio.lo, s.ratio.hi);
    CHECK(s.ok && !s.bootstrap);
    CHECK_NEAR(s.ratio.estimate, 2.0, 1e-9);
    CHECK(s.ratio.lo <= 2.0 + 1e-9 && 2.0 - 1e-9 <= s.ratio.hi && s.ratio.hi - s.ratio.lo < 0.01);

    s = gb_ab_speed_of(base, base, 3, WARMUP);
    CHECK(s.ok && s.ratio.estimate == 1.0 && s.ratio.lo == 1.0 && s.ratio.hi == 1.0);

    s = gb_ab_speed_of(base, fast, 1, WARMUP);
    printf("one repeat (bootstrap), 2x: %.4f (%.4f-%.4f)\n", s.ratio.estimate, s.ratio.lo,
           s.ratio.hi);
    CHECK(s.ok && s.bootstrap && s.ratio.lo <= 2.0 && 2.0 <= s.ratio.hi);

    s = gb_ab_speed_of(base, fast, 3, STEPS);   /* nothing left to time */
    CHECK(!s.ok);
    for (int r = 0; r < 3; r++) {
        gb_ab_run_free(&base[r]);
        gb_ab_run_free(&fast[r]);
    }
}

static void check_loss_readings(void)
{
    char buf[256];
    gb_ab_run base = make_run(10, 0, 0, 3.0);

    gb_ab_run same = make_run(10, 0, 0, 3.0);
    gb_ab_loss_diff d = gb_ab_loss_compare(&base, &same);
    CHECK(d.n_common == STEPS && d.max_step_diff == 0.0);
    gb_ab_loss_reading(&d, 1e-4, buf, sizeof buf);
    CHECK_TEXT(buf, "same loss curve (max difference 0)");

    gb_ab_run close = make_run(10, 2.3e-6, 7, 3.0 + 1e-6);
    d = gb_ab_loss_compare(&base, &close);
    CHECK(d.max_step == 7);
    gb_ab_loss_reading(&d, 1e-4, buf, sizeof buf);
    CHECK_TEXT(buf, "same loss curve within 3e-6");
    gb_ab_loss_reading(&d, 1e-6, buf, sizeof buf);   /* a stricter tolerance flags it */
    CHECK_TEXT(buf, "final val loss 1e-6 higher; the curves differ by up to 2.3e-6 (step 7)");

    gb_ab_run other_lr = make_run(10, 0.031, 12, 3.012);
    d = gb_ab_loss_compare(&base, &other_lr);
    gb_ab_loss_reading(&d, 1e-4, buf, sizeof buf);
    CHECK_TEXT(buf, "final val loss 0.012 higher; the curves differ by up to 0.031 (step 12)");

    gb_ab_run lower = make_run(10, -0.5, 3, 2.75);
    d = gb_ab_loss_compare(&base, &lower);
    gb_ab_loss_reading(&d, 1e-4, buf, sizeof buf);
    CHECK_TEXT(buf, "final val loss 0.25 lower; the curves differ by up to 0.5 (step 3)");

    gb_ab_run no_eval = make_run(10, 0.2, 20, NAN);
    no_eval.train_loss = NAN;
    d = gb_ab_loss_compare(&base, &no_eval);
    gb_ab_loss_reading(&d, 1e-4, buf, sizeof buf);
    CHECK_TEXT(buf, "loss at the last step 0.2 higher; the curves differ by up to 0.2 (step 20)");

    gb_ab_run *runs[] = {&base, &same, &close, &other_lr, &lower, &no_eval};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++)
        gb_ab_run_free(runs[i]);
}

static void check_sentences(void)
{
    char buf[512];
    gb_ab_speed fast = {1, 0, {1.83, 1.79, 1.88}};
    gb_ab_sentence("flash", &fast, 100.0, 60.0, "same loss curve within 3e-6", buf, sizeof buf);
    CHECK_TEXT(buf, "flash: 1.83x faster (95% CI 1.79-1.88), 40% less planned memory, same "
                    "loss curve within 3e-6.");

    gb_ab_speed slow = {1, 1, {0.8, 0.75, 0.85}};
    gb_ab_sentence("big", &slow, 100.0, 112.0, "final val loss 0.012 higher", buf, sizeof buf);
    CHECK_TEXT(buf, "big: 1.25x slower (95% CI 1.18-1.33, bootstrap over steps), 12% more "
                    "planned memory, final val loss 0.012 higher.");

    gb_ab_speed unclear = {1, 0, {1.01, 0.97, 1.05}};
    gb_ab_sentence("same", &unclear, 100.0, 100.0, "same loss curve (max difference 0)", buf,
                   sizeof buf);
    CHECK_TEXT(buf, "same: no measurable speed difference (1.01x, 95% CI 0.97-1.05), same "
                    "planned memory, same loss curve (max difference 0).");

    gb_ab_speed none = {0, 0, {NAN, NAN, NAN}};
    gb_ab_sentence("x", &none, NAN, 5.0, "same loss curve (max difference 0)", buf, sizeof buf);
    CHECK_TEXT(buf, "x: speed n/a, planned memory n/a, same loss curve (max difference 0).");

    gb_ab_speed wide = {1, 0, {3.2, 0.0012, 24000.0}};
    gb_ab_sentence("noisy", &wide, 1.0, 1.0, "same loss curve (max difference 0)", buf,
                   sizeof buf);
    CHECK_TEXT(buf, "noisy: no measurable speed difference (3.20x, 95% CI 0.0012-2.4e4), same "
                    "planned memory, same loss curve (max difference 0).");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    check_reader(argv[1]);
    check_timing_and_speed();
    check_loss_readings();
    check_sentences();
    return check_exit("ab verdict");
}
