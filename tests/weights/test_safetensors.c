/* The safetensors reader and writer (tools/weights/safetensors.c): each file of the fuzz corpus
 * (tests/fuzz/corpus/safetensors) is accepted or refused with the message it deserves,
 * and what the writer writes reads back bit for bit, metadata included.
 *
 * usage: test-safetensors CORPUS_DIR SCRATCH_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

static int failures;

/* Parses DIR/NAME; a file that should be refused must be, with `message` in the text. */
static void expect_file(const char *dir, const char *name, const char *message)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    gb_diag diag = {0};
    gb_safetensors *st = gb_safetensors_read(path, &diag);
    const char *said = diag.count ? diag.messages[0] : "";
    if (message ? (st || !strstr(said, message) || !strstr(said, name)) : !st) {
        fprintf(stderr, "FAIL %s: %s (said: \"%s\")\n", name,
                message ? "not refused with the file's name and the expected reason"
                        : "a valid file was refused", said);
        failures++;
    } else {
        printf("ok   %-20s %s\n", name, message ? said : "accepted");
    }
    gb_safetensors_free(st);
    gb_diag_clear(&diag);
}

static void test_corpus(const char *dir)
{
    static const struct {
        const char *file, *message;
    } cases[] = {
        {"valid-f32", NULL},
        {"valid-mixed", NULL},
        {"escapes", NULL},
        {"i64-tensor", NULL},
        {"overlap", "overlap"},
        {"hole", "a hole"},
        {"trailing-bytes", "belong to none"},
        {"past-end", "run past the end"},
        {"shape-mismatch", "different number of bytes"},
        {"unknown-dtype", "dtype is none of"},
        {"huge-shape", "more elements than"},
        {"huge-offsets", "too big integer"},
        {"header-too-long", "100 MiB"},
        {"not-json", "not valid JSON"},
        {"duplicate-name", "appears twice"},
        {"metadata-not-string", "not a string"},
        {"deep-nesting", "its entry is not an object"},
        {"bad-surrogate", "invalid Unicode"},
        {"empty", "shorter than the 8-byte"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_file(dir, cases[i].file, cases[i].message);
}

/* F16 and BF16 widen exactly; an I64 tensor is refused by name. */
static void test_widening(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/valid-mixed", dir);
    gb_diag diag = {0};
    gb_safetensors *st = gb_safetensors_read(path, &diag);
    float b[2] = {0}, h[2] = {0};
    if (!st || gb_safetensors_to_f32(gb_safetensors_find(st, "b"), b, path, &diag) ||
        gb_safetensors_to_f32(gb_safetensors_find(st, "h"), h, path, &diag) || b[0] != 1.0f ||
        b[1] != 2.0f || h[0] != 1.0f || h[1] != 2.0f) {
        fprintf(stderr, "FAIL widening BF16/F16: got %g %g, %g %g\n", b[0], b[1], h[0], h[1]);
        failures++;
    }
    gb_safetensors_free(st);
    snprintf(path, sizeof path, "%s/i64-tensor", dir);
    st = gb_safetensors_read(path, &diag);
    if (!st || gb_safetensors_to_f32(&st->tensors[0], b, path, &diag) == 0 ||
        !strstr(diag.messages[diag.count - 1], "tensor a is I64")) {
        fprintf(stderr, "FAIL an I64 tensor is not refused by name\n");
        failures++;
    }
    gb_safetensors_free(st);
    gb_diag_clear(&diag);
}

static void test_round_trip(const char *scratch)
{
    float a[6] = {1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 1e-30f}, v[3] = {7.0f, 8.0f, 9.0f};
    const gb_st_out out[] = {{"m.weight", 2, {2, 3}, a}, {"v \"quoted\"", 1, {3}, v}};
    const char *const meta[] = {"format", "pt", "note", "written by gearbox"};
    char path[4096];
    snprintf(path, sizeof path, "%s/round.safetensors", scratch);
    gb_diag diag = {0};
    gb_safetensors *st = NULL;
    if (gb_safetensors_write(path, out, 2, meta, 2, &diag) == 0)
        st = gb_safetensors_read(path, &diag);
    const gb_st_tensor *m = st ? gb_safetensors_find(st, "m.weight") : NULL;
    const gb_st_tensor *q = st ? gb_safetensors_find(st, "v \"quoted\"") : NULL;
    int ok = m && q && m->ndim == 2 && m->shape[0] == 2 && m->shape[1] == 3 &&
             memcmp(m->data, a, sizeof a) == 0 && memcmp(q->data, v, sizeof v) == 0 &&
             (size_t)(m->data - st->file) % 8 == 0 &&
             strcmp(gb_safetensors_metadata(st, "note"), "written by gearbox") == 0;
    if (!ok) {
        fprintf(stderr, "FAIL write then read: %s\n", diag.count ? diag.messages[0] : "differs");
        failures++;
    } else {
        printf("ok   write then read back bit for bit, metadata included\n");
    }
    gb_safetensors_free(st);
    gb_diag_clear(&diag);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s CORPUS_DIR SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    test_corpus(argv[1]);
    test_widening(argv[1]);
    test_round_trip(argv[2]);
    return failures ? 1 : 0;
}
