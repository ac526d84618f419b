/* Tests of the configuration module (engine/config.c) against a schema of their own, not
 * the core's: parsing, `--set` overrides, validation messages, the effective config and
 * its round trip, path resolution and did-you-mean suggestions.
 *
 *   test_config FIXTURE_DIR        the API checks
 *   test_config FIXTURE_DIR NAME   NAME.ini's messages must equal NAME.expected (golden)
 *
 * The test changes into FIXTURE_DIR and loads fixtures by their bare names; messages
 * print paths as given, so the golden files hold no machine-specific folder. It checks
 * messages and values, not memory: run it under valgrind for that.
 */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "config.h"

/* ---- the schema ---------------------------------------------------------------------- */

static const gb_option run_options[] = {
    {.key = "seed", .type = GB_OPT_INT, .default_value = "1337", .min = 0, .max = 2147483647,
     .help = "random seed"},
    {.key = "out_dir", .type = GB_OPT_STRING, .default_value = "out", .help = "output folder"},
    {.key = "threads", .type = GB_OPT_INT, .default_value = "0", .min = 0, .max = 1024,
     .help = "0: all cores"},
};
static const gb_option model_options[] = {
    {.key = "n_layer", .type = GB_OPT_INT, .default_value = "4", .min = 1, .max = 96,
     .help = "transformer blocks"},
    {.key = "n_head", .type = GB_OPT_INT, .default_value = "4", .min = 1, .max = 64,
     .help = "attention heads"},
    {.key = "dropout", .type = GB_OPT_FLOAT, .default_value = "0.0", .min = 0, .max = 1,
     .help = "dropout probability"},
    {.key = "tie_weights", .type = GB_OPT_BOOL, .default_value = "true",
     .help = "share the embedding and output matrices"},
};
static const gb_option data_options[] = {
    {.key = "path", .type = GB_OPT_STRING, .default_value = "data/tiny.txt", .help = "text"},
    {.key = "batch_size", .type = GB_OPT_INT, .default_value = "8", .min = 1, .max = 4096,
     .help = "sequences per step"},
};
static const gb_option train_options[] = {
    {.key = "learning_rate", .type = GB_OPT_FLOAT, .default_value = "6e-4", .min = 0, .max = 1,
     .help = "peak learning rate"},
    {.key = "steps", .type = GB_OPT_INT, .default_value = "100", .min = 1, .max = 1e9,
     .help = "optimizer steps"},
    {.key = "precision", .type = GB_OPT_ENUM, .default_value = "fp32",
     .choices = "fp32|bf16|fp16", .help = "compute type"},
};
static const gb_option attn_options[] = {
    {.key = "causal", .type = GB_OPT_BOOL, .default_value = "true", .help = "mask the future"},
    {.key = "block_size", .type = GB_OPT_INT, .default_value = "64", .min = 1, .max = 4096,
     .help = "tile size"},
};
static const char *const plugin_key[] = {"plugin"};

#define MAX_OPTIONS 4
#define N_SECTIONS 5

typedef struct schema_section {
    const char *name;
    const gb_option *options;
    size_t n_options;
    const char *const *ignore;
    size_t n_ignore;
} schema_section;

#define SECTION(name, options) {name, options, sizeof options / sizeof options[0], NULL, 0}
static const schema_section schema[N_SECTIONS] = {
    SECTION("run", run_options),
    SECTION("model", model_options),
    SECTION("data", data_options),
    SECTION("train", train_options),
    {"attn", attn_options, sizeof attn_options / sizeof attn_options[0], plugin_key, 1},
};
static const char *const known_sections[N_SECTIONS] = {"run", "model", "data", "train", "attn"};

typedef gb_value schema_values[N_SECTIONS][MAX_OPTIONS];

/* What the core will do with a config: check its sections, then validate each one. */
static int validate_all(gb_config *cfg, schema_values values, gb_diag *diag)
{
    int problems = gb_config_check_sections(cfg, known_sections, N_SECTIONS, diag);
    for (size_t i = 0; i < N_SECTIONS; i++)
        problems += gb_config_validate_section(cfg, schema[i].name, schema[i].options,
                                               schema[i].n_options, schema[i].ignore,
                                               schema[i].n_ignore, values[i], diag);
    return problems;
}

/* ---- checking ------------------------------------------------------------------------ */

/* The diagnostics must be exactly `expected`, in order; clears them. */
static void check_messages(gb_diag *diag, const char *const *expected, int n, int line)
{
    if (diag->count != n) {
        fprintf(stderr, "test_config.c:%d: %d messages, expected %d:\n", line, diag->count, n);
        gb_diag_print(diag, stderr);
        check_failures++;
    } else {
        for (int i = 0; i < n; i++)
            check_text_at(diag->messages[i], expected[i], "message", __FILE_NAME__, line);
    }
    gb_diag_clear(diag);
}
#define CHECK_MESSAGES(diag, ...)                                                       \
    check_messages((diag), (const char *const[]){__VA_ARGS__},                          \
                   (int)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(char *)), __LINE__)
#define CHECK_NO_MESSAGES(diag) check_messages((diag), NULL, 0, __LINE__)

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *text = NULL;
    size_t cap = 0;
    ssize_t len = getdelim(&text, &cap, '\0', f);
    fclose(f);
    if (len < 0) {
        free(text);
        return strdup("");
    }
    return text;
}

/* ---- golden files -------------------------------------------------------------------- */

/* Loads NAME.ini as the core would and compares what gearbox prints with NAME.expected. */
static int run_golden(const char *name)
{
    char ini[PATH_MAX], expected_path[PATH_MAX];
    snprintf(ini, sizeof ini, "%s.ini", name);
    snprintf(expected_path, sizeof expected_path, "%s.expected", name);
    char *expected = read_text(expected_path);
    if (!expected || !*expected) {
        fprintf(stderr, "%s: missing or empty; a bad fixture must produce messages\n",
                expected_path);
        free(expected);
        return 1;
    }
    gb_diag diag = {0};
    gb_config *cfg = gb_config_load(ini, &diag);
    if (cfg) {
        schema_values values;
        validate_all(cfg, values, &diag);
        gb_config_free(cfg);
    }
    char *actual = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&actual, &len);
    gb_diag_print(&diag, out);
    fclose(out);
    gb_diag_clear(&diag);
    int failed = strcmp(actual, expected) != 0;
    if (failed)
        fprintf(stderr, "%s: the messages differ from %s\n--- expected\n%s--- actual\n%s", ini,
                expected_path, expected, actual);
    else
        printf("%s: messages as expected\n%s", ini, actual);
    free(actual);
    free(expected);
    return failed;
}

/* ---- API checks ---------------------------------------------------------------------- */

/* good.ini spells values every accepted way; comments and indentation must not matter. */
static void check_good_file(const char *fixture_dir)
{
    gb_diag diag = {0};
    gb_config *cfg = gb_config_load("good.ini", &diag);
    CHECK_NO_MESSAGES(&diag);
    if (!CHECK(cfg))
        return;
    CHECK_TEXT(gb_config_get(cfg, "model", "n_layer"), "6");
    CHECK_TEXT(gb_config_get(cfg, "model", "n_head"), "6");
    CHECK_TEXT(gb_config_get(cfg, "data", "path"), "data/shakespeare.txt");
    CHECK_TEXT(gb_config_get(cfg, "attn", "plugin"), "flash");
    CHECK(gb_config_get(cfg, "train", "steps") == NULL);
    CHECK(gb_config_get(cfg, "nowhere", "n_layer") == NULL);
    CHECK_TEXT(gb_config_dir(cfg), fixture_dir);

    schema_values v;
    CHECK(validate_all(cfg, v, &diag) == 0);
    CHECK_NO_MESSAGES(&diag);
    CHECK(v[0][0].i == 42);
    CHECK_TEXT(v[0][1].s, "runs/good");
    CHECK(v[0][2].i == 0);
    CHECK(v[1][0].i == 6 && v[1][1].i == 6);
    CHECK(v[1][2].f == 0.1);
    CHECK(v[1][3].i == 0);
    CHECK_TEXT(v[2][0].s, "data/shakespeare.txt");
    CHECK(v[2][1].i == 8);
    CHECK(v[3][0].f == 0.001);
    CHECK(v[3][1].i == 100);
    CHECK(v[3][2].i == 1);
    CHECK(v[4][0].i == 1 && v[4][1].i == 64);
    gb_config_free(cfg);
}

static void check_defaults(void)
{
    gb_diag diag = {0};
    gb_config *cfg = gb_config_load_string("[model]\nn_layer = 2\n", "saved", "/base", &diag);
    CHECK_NO_MESSAGES(&diag);
    if (!CHECK(cfg))
        return;
    schema_values v;
    CHECK(validate_all(cfg, v, &diag) == 0);
    CHECK_NO_MESSAGES(&diag);
    CHECK(v[1][0].i == 2);
    CHECK(v[1][1].i == 4);
    CHECK(v[1][2].f == 0.0);
    CHECK(v[1][3].i == 1);
    CHECK(v[3][0].f == 6e-4);
    CHECK(v[3][1].i == 100);
    CHECK(v[3][2].i == 0);
    CHECK_TEXT(v[2][0].s, "data/tiny.txt");
    /* strings belong to cfg, not to the option table (a plugin may be unloaded first) */
    CHECK(v[2][0].s != data_options[0].default_value);
    CHECK(gb_config_get(cfg, "model", "n_head") == NULL);
    gb_config_free(cfg);
}

/* Line endings, byte-order mark, comments and repeated section headers. */
static void check_text_forms(void)
{
    gb_diag diag = {0};
    const char *text = "\xEF\xBB\xBF[model]\r\n"
                       "n_layer = 3\r\n"
                       "[data]\n"
                       "a = x;y\n"
                       "b = x ; y\n"
                       "c = x#y\n"
                       "d = x\t# y\n"
                       "e = #x\n"
                       "f = a = b\n"
                       "    g=1\n"
                       "[model]\n"
                       "n_head = 2";
    gb_config *cfg = gb_config_load_string(text, "text", "/base", &diag);
    CHECK_NO_MESSAGES(&diag);
    if (!CHECK(cfg))
        return;
    CHECK_TEXT(gb_config_get(cfg, "model", "n_layer"), "3");
    CHECK_TEXT(gb_config_get(cfg, "data", "a"), "x;y");
    CHECK_TEXT(gb_config_get(cfg, "data", "b"), "x");
    CHECK_TEXT(gb_config_get(cfg, "data", "c"), "x#y");
    CHECK_TEXT(gb_config_get(cfg, "data", "d"), "x");
    CHECK_TEXT(gb_config_get(cfg, "data", "e"), "");
    CHECK_TEXT(gb_config_get(cfg, "data", "f"), "a = b");
    CHECK_TEXT(gb_config_get(cfg, "data", "g"), "1");
    CHECK_TEXT(gb_config_get(cfg, "model", "n_head"), "2");
    CHECK(gb_config_check_sections(cfg, known_sections, N_SECTIONS, &diag) == 0);
    gb_config_free(cfg);
    CHECK_NO_MESSAGES(&diag);
}

/* Old Mac files end lines with a lone CR: each is a line of its own, with its number. */
static void check_cr_line_endings(void)
{
    gb_diag diag = {0};
    const char *text = "[model]\rn_layer = 3\r\rn_head = 2\r[data]\rbatch = x y\rnonsense\r";
    CHECK(gb_config_load_string(text, "mac.ini", "/base", &diag) == NULL);
    const char *expected[] = {"mac.ini:7: syntax error: nonsense; expected 'key = value' or "
                              "'[section]'"};
    check_messages(&diag, expected, 1, __LINE__);
    gb_config *cfg = gb_config_load_string("[model]\rn_layer = 3\rn_head = 2\r", "mac.ini",
                                           "/base", &diag);
    CHECK_NO_MESSAGES(&diag);
    if (CHECK(cfg)) {
        CHECK_TEXT(gb_config_get(cfg, "model", "n_layer"), "3");
        CHECK_TEXT(gb_config_get(cfg, "model", "n_head"), "2");
    }
    gb_config_free(cfg);
}

/* A message quoting the file shows its control bytes escaped, never raw: a hostile
 * file must not reach the terminal's escape sequences. */
static void check_control_bytes_escaped(void)
{
    gb_diag diag = {0};
    CHECK(gb_config_load_string("[model]\nbad\x1b[2J\x07 line\n", "ctl.ini", "/base", &diag) ==
          NULL);
    const char *expected[] = {"ctl.ini:2: syntax error: bad\\x1b[2J\\x07 line; expected "
                              "'key = value' or '[section]'"};
    check_messages(&diag, expected, 1, __LINE__);
}

/* Debian's inih reads lines into 200 bytes: 198 characters, '\n' and a NUL. */
static void check_line_length(void)
{
    char text[256];
    gb_diag diag = {0};
    snprintf(text, sizeof text, "[data]\npath = %0*d\n", 198 - 7, 0);
    gb_config *cfg = gb_config_load_string(text, "text", "/base", &diag);
    CHECK_NO_MESSAGES(&diag);
    if (CHECK(cfg))
        CHECK(strlen(gb_config_get(cfg, "data", "path")) == 191);
    gb_config_free(cfg);

    snprintf(text, sizeof text, "[data]\npath = %0*d\n", 199 - 7, 0);
    CHECK(gb_config_load_string(text, "text", "/base", &diag) == NULL);
    CHECK_MESSAGES(&diag, "text:2: the line is 199 characters long; at most 198 are supported");
}

static void check_set_overrides(void)
{
    gb_diag diag = {0};
    gb_config *cfg = gb_config_load("good.ini", &diag);
    CHECK_NO_MESSAGES(&diag);
    if (!CHECK(cfg))
        return;
    CHECK(gb_config_set(cfg, "model.n_layer=12", &diag) == 0);
    CHECK(gb_config_set(cfg, "train.steps= 250 ", &diag) == 0);
    CHECK(gb_config_set(cfg, "data.path=other.txt", &diag) == 0);
    CHECK(gb_config_set(cfg, "data.path=", &diag) == 0);
    CHECK_NO_MESSAGES(&diag);
    CHECK_TEXT(gb_config_get(cfg, "model", "n_layer"), "12");
    CHECK_TEXT(gb_config_get(cfg, "train", "steps"), "250");
    CHECK_TEXT(gb_config_get(cfg, "data", "path"), "");
    schema_values v;
    CHECK(validate_all(cfg, v, &diag) == 0);
    CHECK_NO_MESSAGES(&diag);
    CHECK(v[1][0].i == 12);
    CHECK(v[3][1].i == 250);
    CHECK_TEXT(v[2][0].s, "");

    /* problems in overrides name the flag instead of a file line */
    CHECK(gb_config_set(cfg, "model.n_layer=x", &diag) == 0);
    CHECK(gb_config_set(cfg, "train.learning_rate=2", &diag) == 0);
    CHECK(gb_config_set(cfg, "modle.n_head=2", &diag) == 0);
    CHECK(gb_config_set(cfg, "model.n_heads=2", &diag) == 0);
    CHECK(validate_all(cfg, v, &diag) == 4);
    CHECK_MESSAGES(&diag,
                   "--set modle.n_head=2: unknown section [modle]; did you mean [model]? "
                   "Known sections: run, model, data, train, attn",
                   "--set model.n_heads=2: [model] unknown key 'n_heads'; did you mean 'n_head'?",
                   "--set model.n_layer=x: [model] n_layer = 'x': expected an integer",
                   "--set train.learning_rate=2: [train] learning_rate = 2: out of range [0, 1]");
    gb_config_free(cfg);
}

static void check_set_malformed(void)
{
    static const char *const malformed[] = {
        "", "model", "model.n_layer", "n_layer=4", ".n_layer=4", "model.=4", "=4",
        "Model.n_layer=4", "model.n-layer=4", "model.n_layer.x=4", "model..n_layer=4",
        "model n_layer=4",
    };
    gb_diag diag = {0};
    gb_config *cfg = gb_config_load_string("[model]\nn_layer = 2\n", "text", "/base", &diag);
    CHECK_NO_MESSAGES(&diag);
    if (!CHECK(cfg))
        return;
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        char expected[128];
        snprintf(expected, sizeof expected, "--set '%s': expected section.key=value",
                 malformed[i]);
        CHECK(gb_config_set(cfg, malformed[i], &diag) == -1);
        CHECK_MESSAGES(&diag, expected);
    }
    /* values an INI file could not hold, so that the effective config reads back the same */
    static const char *const unstorable[] = {"data.path=a ;b", "data.path=#x", "data.path=a\nb"};
    /* as the messages quote them: a line break escaped */
    static const char *const quoted[] = {"data.path=a ;b", "data.path=#x", "data.path=a\\nb"};
    for (size_t i = 0; i < sizeof unstorable / sizeof unstorable[0]; i++) {
        char expected[256];
        snprintf(expected, sizeof expected,
                 "--set '%s': the value cannot hold a line break, nor ';' or '#' at its start or "
                 "after a blank (an INI file could not store it)", quoted[i]);
        CHECK(gb_config_set(cfg, unstorable[i], &diag) == -1);
        CHECK_MESSAGES(&diag, expected);
    }
    CHECK_TEXT(gb_config_get(cfg, "model", "n_layer"), "2");
    CHECK(gb_config_get(cfg, "data", "path") == NULL);
    gb_config_free(cfg);
}

static bool same_values(const schema_values a, const schema_values b)
{
    for (size_t s = 0; s < N_SECTIONS; s++) {
        for (size_t i = 0; i < schema[s].n_options; i++) {
            gb_option_type type = schema[s].options[i].type;
            bool same = type == GB_OPT_STRING  ? a[s][i].s && b[s][i].s &&
                                                     strcmp(a[s][i].s, b[s][i].s) == 0
                        : type == GB_OPT_FLOAT ? a[s][i].f == b[s][i].f
                                               : a[s][i].i == b[s][i].i;
            if (!same) {
                fprintf(stderr, "[%s] %s differs after the round trip\n", schema[s].name,
                        schema[s].options[i].key);
                return false;
            }
        }
    }
    return true;
}

/* The effective config (good.ini plus an override) must equal good.effective, and read
 * back (as a checkpoint's saved config would be) to the same values and the same text. */
static void check_write_round_trip(void)
{
    gb_diag diag = {0};
    gb_config *cfg = gb_config_load("good.ini", &diag);
    CHECK_NO_MESSAGES(&diag);
    if (!CHECK(cfg))
        return;
    CHECK(gb_config_set(cfg, "train.steps=250", &diag) == 0);
    schema_values first, second;
    CHECK(validate_all(cfg, first, &diag) == 0);
    /* validating a section again restarts its record instead of adding a second one */
    CHECK(gb_config_validate_section(cfg, "model", model_options, 4, NULL, 0, first[1],
                                     &diag) == 0);
    CHECK_NO_MESSAGES(&diag);
    char *written = gb_config_text(cfg);
    char *expected = read_text("good.effective");
    if (!CHECK(written && expected))
        goto out;
    CHECK_TEXT(written, expected);

    gb_config *reread = gb_config_load_string(written, "saved config", gb_config_dir(cfg), &diag);
    CHECK_NO_MESSAGES(&diag);
    if (CHECK(reread)) {
        CHECK(validate_all(reread, second, &diag) == 0);
        CHECK_NO_MESSAGES(&diag);
        CHECK(same_values(first, second));
        char *rewritten = gb_config_text(reread);
        CHECK_TEXT(rewritten, written);
        free(rewritten);
        gb_config_free(reread);
    }
out:
    free(expected);
    free(written);
    gb_config_free(cfg);
}

/* Paths from the file resolve against its folder, paths from --set against the working
 * directory (the fixture folder here), absolute ones stay. */
/* The longest value a file line holds ("path=" and 193 characters) still reads back
 * from the effective config: written "key=value" where "key = value" would not fit. A
 * --set value too long to be saved is refused. */
static void check_long_value_round_trip(void)
{
    char value[256], text[300], assignment[300];
    memset(value, 'x', 193);
    value[193] = '\0';
    snprintf(text, sizeof text, "[data]\npath=%s\n", value);
    gb_diag diag = {0};
    gb_config *cfg = gb_config_load_string(text, "long.ini", "/base", &diag);
    schema_values values;
    char *written = cfg && validate_all(cfg, values, &diag) == 0 ? gb_config_text(cfg) : NULL;
    gb_config *reread = written ? gb_config_load_string(written, "saved", "/base", &diag) : NULL;
    CHECK_NO_MESSAGES(&diag);
    if (CHECK(reread))
        CHECK_TEXT(gb_config_get(reread, "data", "path"), value);
    snprintf(assignment, sizeof assignment, "data.path=%sx", value);
    CHECK(cfg && gb_config_set(cfg, assignment, &diag) == -1);
    CHECK(diag.count == 1 && strstr(diag.messages[0], "the value is 194 characters long"));
    gb_diag_clear(&diag);
    free(written);
    gb_config_free(reread);
    gb_config_free(cfg);
}

static void check_resolve_path(const char *fixture_dir)
{
    gb_diag diag = {0};
    gb_config *cfg = gb_config_load("good.ini", &diag);
    gb_config *saved = gb_config_load_string("", "saved", "/", &diag);
    gb_config *relative = gb_config_load_string("", "saved", "sub", &diag);
    CHECK_NO_MESSAGES(&diag);
    if (!CHECK(cfg && saved && relative) || !CHECK(chdir("/") == 0))
        goto out;
    gb_config_set(saved, "data.path=typed/here", &diag);
    char *paths[] = {
        gb_config_resolve_path(cfg, "data", "path", "/abs/file.txt"),
        gb_config_resolve_path(cfg, "data", "path", "data/tiny.txt"),
        gb_config_resolve_path(saved, "data", "path", "data"),
        gb_config_resolve_path(saved, "data", "path", "typed/here"),
    };
    CHECK(chdir(fixture_dir) == 0);
    char expected[PATH_MAX + 32];
    snprintf(expected, sizeof expected, "%s/data/tiny.txt", fixture_dir);
    CHECK_TEXT(paths[0], "/abs/file.txt");
    CHECK_TEXT(paths[1], expected);
    CHECK_TEXT(paths[2], "/data");
    CHECK_TEXT(paths[3], "/typed/here");   /* the working directory was / */
    snprintf(expected, sizeof expected, "%s/sub", fixture_dir);
    CHECK_TEXT(gb_config_dir(relative), expected);
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        free(paths[i]);
out:
    gb_config_free(cfg);
    gb_config_free(saved);
    gb_config_free(relative);
}

static void check_suggest(void)
{
    const char *const keys[] = {"n_layer", "n_head", "n_embd"};
    CHECK_TEXT(gb_suggest("n_layr", keys, 3), "n_layer");
    CHECK_TEXT(gb_suggest("n_haed", keys, 3), "n_head"); /* a swap is one edit */
    CHECK_TEXT(gb_suggest("n_embed", keys, 3), "n_embd");
    CHECK_TEXT(gb_suggest("modle", known_sections, N_SECTIONS), "model");
    CHECK(gb_suggest("layers", keys, 3) == NULL);
    CHECK(gb_suggest("xyz", known_sections, N_SECTIONS) == NULL);
    CHECK(gb_suggest("n_layer", keys, 0) == NULL);
    /* ties go to the first candidate */
    const char *const tied[] = {"ac", "ab"};
    CHECK_TEXT(gb_suggest("aa", tied, 2), "ac");
    /* at least one edit is allowed, even for short words */
    CHECK_TEXT(gb_suggest("lr", (const char *const[]){"l"}, 1), "l");
    /* longer words allow len/3 edits: "learnin_rat" is 2 from "learning_rate" */
    CHECK_TEXT(gb_suggest("learnin_rat", (const char *const[]){"learning_rate"}, 1),
               "learning_rate");
}

/* A default that does not parse is the option table's fault, and says so. */
static void check_bad_default(void)
{
    static const gb_option broken[] = {
        {.key = "n_layer", .type = GB_OPT_INT, .default_value = "four", .min = 1, .max = 9},
        {.key = "mode", .type = GB_OPT_ENUM, .default_value = "c", .choices = "a|b"},
    };
    gb_diag diag = {0};
    gb_config *cfg = gb_config_load_string("", "text", "/base", &diag);
    CHECK_NO_MESSAGES(&diag);
    if (!CHECK(cfg))
        return;
    gb_value values[2];
    CHECK(gb_config_validate_section(cfg, "model", broken, 2, NULL, 0, values, &diag) == 2);
    CHECK_MESSAGES(&diag,
                   "internal error: [model] n_layer: the default value 'four' is invalid: "
                   "expected an integer",
                   "internal error: [model] mode: the default value 'c' is invalid: "
                   "expected one of a, b");
    gb_config_free(cfg);
}

/* A section that takes no keys at all says so instead of listing none. */
static void check_section_without_keys(void)
{
    gb_diag diag = {0};
    gb_config *cfg = gb_config_load_string("[comm]\nplugin = single\nranks = 2\n", "text",
                                           "/base", &diag);
    CHECK_NO_MESSAGES(&diag);
    if (!CHECK(cfg))
        return;
    CHECK(gb_config_validate_section(cfg, "comm", NULL, 0, plugin_key, 1, NULL, &diag) == 1);
    CHECK_MESSAGES(&diag, "text:3: [comm] unknown key 'ranks'; valid keys: plugin");
    CHECK(gb_config_validate_section(cfg, "comm", NULL, 0, NULL, 0, NULL, &diag) == 2);
    CHECK_MESSAGES(&diag, "text:2: [comm] unknown key 'plugin'; this section takes no keys",
                   "text:3: [comm] unknown key 'ranks'; this section takes no keys");
    gb_config_free(cfg);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s FIXTURE_DIR [NAME]\n", argv[0]);
        return 2;
    }
    char fixture_dir[PATH_MAX];
    if (!realpath(argv[1], fixture_dir) || chdir(fixture_dir) != 0) {
        perror(argv[1]);
        return 2;
    }
    if (argc == 3)
        return run_golden(argv[2]);

    check_good_file(fixture_dir);
    check_defaults();
    check_text_forms();
    check_cr_line_endings();
    check_control_bytes_escaped();
    check_line_length();
    check_set_overrides();
    check_set_malformed();
    check_write_round_trip();
    check_long_value_round_trip();
    check_resolve_path(fixture_dir);
    check_suggest();
    check_bad_default();
    check_section_without_keys();
    return check_exit("config");
}
