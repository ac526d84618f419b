/* `gearbox new-plugin [--cuda] KIND NAME DIR`: a plugin folder that builds, loads and goes
 * through `gearbox test-plugin` before its author has written a line.
 *
 * The files come from the templates compiled into the binary (tools/scaffold/): a
 * meson.build that finds gearbox with pkg-config, NAME.c with every entry of the kind's
 * vtable stubbed to answer GB_ERR_UNSUPPORTED (the instance, but a device's, made by the
 * plugin toolkit, gearbox/toolkit/instance.h), and a README. With --cuda (attention and
 * optimizers, the kinds that run kernels on the device gearbox gives them) NAME.cu is
 * compiled by nvcc, checks for the cuda device and a GPU in create() and keeps the
 * device's stream, beside cuda_status.h. The module is named as the loader looks for it
 * (<kind>-<name>-cpu.so, <kind>-<name>-cuda.so, device-<name>.so). Nothing is
 * overwritten: DIR must not exist yet or be empty, and its parent must exist.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "gearbox/engine/loader.h"
#include "scaffold/scaffold.h"

#define MAX_NAME 40

const gb_cli_spec gb_cli_new_plugin_spec = {
    .verb = "new-plugin",
    .usage = "gearbox new-plugin [--cuda] KIND NAME DIR",
    .about =
        "Writes a plugin that builds and loads but does nothing yet, to start from:\n"
        "  DIR/meson.build   builds KIND-NAME-cpu.so (device-NAME.so for a device) against\n"
        "                    gearbox's headers, found with pkg-config (gearbox-plugin)\n"
        "  DIR/NAME.c        every entry of the KIND vtable, each a stub that answers\n"
        "                    GB_ERR_UNSUPPORTED with a \"TODO\" message; besides a\n"
        "                    device, its instance starts with the plugin toolkit's\n"
        "                    gb_plugin_instance (gearbox/toolkit/instance.h)\n"
        "  DIR/README.md     how to build it, list it, check it and select it in a config\n"
        "KIND is device, attn, optim, precision or comm; NAME is lower_snake_case (what\n"
        "`[KIND] plugin = NAME` will select). DIR must not exist or be empty; its parent must\n"
        "exist. Then: meson setup DIR/build DIR && ninja -C DIR/build, and\n"
        "gearbox test-plugin DIR/build/KIND-NAME-cpu.so runs the conformance checks.\n",
    .options = {
        {"cuda", 0, NULL, "for attn and optim: a plugin for the cuda device, built with nvcc\n"
         "(sm_80, sm_90, warnings as errors) as KIND-NAME-cuda.so: DIR/NAME.cu,\n"
         "whose create() checks for the cuda device and a GPU and keeps the\n"
         "device's compute stream, and DIR/cuda_status.h (CUDA errors as\n"
         "gearbox's)"},
    },
};

static const char *template_text(const char *name)
{
    for (size_t i = 0; i < gb_scaffold_n_files; i++)
        if (strcmp(gb_scaffold_files[i].name, name) == 0)
            return gb_scaffold_files[i].text;
    return NULL;
}

static int valid_name(const char *name)
{
    size_t len = strlen(name);
    return len > 0 && len <= MAX_NAME && name[0] >= 'a' && name[0] <= 'z' &&
           name[strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_")] == '\0';
}

/* 0 when dir can be written into: created now (with its missing parents), or already
 * there and empty. */
static int make_empty_dir(const char *dir)
{
    if (gb_cli_make_parents("new-plugin", dir))
        return -1;
    if (mkdir(dir, 0777) == 0)
        return 0;
    if (errno != EEXIST) {
        fprintf(stderr, "gearbox new-plugin: cannot create %s: %s\n", dir, strerror(errno));
        return -1;
    }
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "gearbox new-plugin: %s exists and is not a folder I can read: %s\n",
                dir, strerror(errno));
        return -1;
    }
    struct dirent *e;
    int empty = 1;
    while (empty && (e = readdir(d)))
        empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
    closedir(d);
    if (!empty)
        fprintf(stderr, "gearbox new-plugin: %s is not empty; give a new folder (nothing is "
                "overwritten)\n", dir);
    return empty ? 0 : -1;
}

/* Writes `text` into dir/file with @KIND@, @NAME@ and @MODULE@ replaced. */
static int write_file(const char *dir, const char *file, const char *text, const char *kind,
                      const char *name, const char *module)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *out = fopen(path, "wx");
    if (!out) {
        fprintf(stderr, "gearbox new-plugin: cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    const struct { const char *key, *value; } fields[] = {
        {"@KIND@", kind}, {"@NAME@", name}, {"@MODULE@", module}};
    for (const char *p = text; *p;) {
        size_t i = 0;
        while (i < 3 && strncmp(p, fields[i].key, strlen(fields[i].key)) != 0)
            i++;
        if (i < 3) {
            fputs(fields[i].value, out);
            p += strlen(fields[i].key);
        } else {
            fputc(*p++, out);
        }
    }
    if (fclose(out) != 0) {
        fprintf(stderr, "gearbox new-plugin: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* The files of a plugin of `kind` in its flavour: each written file and its template. */
typedef struct scaffold_plan {
    char module[96];
    struct { char file[64], template_name[32]; } files[4];
    int n_files;
} scaffold_plan;

static void add_file(scaffold_plan *plan, const char *file, const char *template_name)
{
    snprintf(plan->files[plan->n_files].file, sizeof plan->files[0].file, "%s", file);
    snprintf(plan->files[plan->n_files].template_name, sizeof plan->files[0].template_name,
             "%s", template_name);
    plan->n_files++;
}

static void plan_files(scaffold_plan *plan, const char *kind, const char *name, int cuda)
{
    char source[64], template_name[32];
    snprintf(source, sizeof source, "%s.%s", name, cuda ? "cu" : "c");
    snprintf(template_name, sizeof template_name, "%s.%s.in", kind, cuda ? "cu" : "c");
    if (strcmp(kind, "device") == 0)
        snprintf(plan->module, sizeof plan->module, "device-%s", name);
    else
        snprintf(plan->module, sizeof plan->module, "%s-%s-%s", kind, name, cuda ? "cuda" : "cpu");
    plan->n_files = 0;
    add_file(plan, "meson.build", cuda ? "meson_cuda.build.in" : "meson.build.in");
    add_file(plan, source, template_name);
    if (cuda)
        add_file(plan, "cuda_status.h", "cuda_status.h.in");
    add_file(plan, "README.md", "README.md.in");
}

/* --cuda into *cuda and the three operands into operands[]: 0, -1 after --help, or the
 * exit status of a usage error. */
static int set_cuda(void *cuda, int index, const char *value)
{
    (void)index, (void)value;
    *(int *)cuda = 1;
    return 0;
}

static int parse_args(int argc, char **argv, int *cuda, const char *operands[3])
{
    return gb_cli_parse_operands(&gb_cli_new_plugin_spec, argc, argv, set_cuda, cuda, 3, 3,
                                 "KIND NAME DIR", operands);
}

int gb_cmd_new_plugin(int argc, char **argv)
{
    int cuda = 0;
    const char *operands[3];
    int rc = parse_args(argc, argv, &cuda, operands);
    if (rc)
        return rc < 0 ? 0 : rc;
    const char *name = operands[1], *dir = operands[2];
    /* the kind's own name from here on: the loader's constant, never NULL */
    const char *kind = gb_kind_name(gb_kind_from_name(operands[0]));
    if (!kind)
        return gb_cli_usage_error("new-plugin", "unknown kind '%s' (device, attn, optim, "
                                  "precision, comm)", operands[0]);
    if (!valid_name(name))
        return gb_cli_usage_error("new-plugin", "name '%s': use lower_snake_case (a letter, "
                                  "then letters, digits or '_'), at most %d characters", name,
                                  MAX_NAME);
    if (strcmp(kind, "attn") == 0 && strcmp(name, "auto") == 0)
        return gb_cli_usage_error("new-plugin", "'auto' is taken: `[attn] plugin = auto` "
                                  "asks gearbox to choose");
    if (cuda && strcmp(kind, "attn") != 0 && strcmp(kind, "optim") != 0)
        return gb_cli_usage_error("new-plugin", "--cuda is for attn and optim, the kinds that "
                                  "run kernels on the device gearbox gives them; a %s plugin "
                                  "is host code (start from `gearbox new-plugin %s`)", kind, kind);
    scaffold_plan plan;
    plan_files(&plan, kind, name, cuda);
    for (int i = 0; i < plan.n_files; i++)
        if (!template_text(plan.files[i].template_name)) {
            fprintf(stderr, "gearbox new-plugin: this gearbox was built without the template "
                    "%s\n", plan.files[i].template_name);
            return 1;
        }
    if (make_empty_dir(dir))
        return 1;
    for (int i = 0; i < plan.n_files; i++)
        if (write_file(dir, plan.files[i].file, template_text(plan.files[i].template_name),
                       kind, name, plan.module))
            return 1;
    printf("wrote %s/meson.build, %s/%s and %s/README.md%s: %s/%s%s, every entry a stub "
           "that answers GB_ERR_UNSUPPORTED\n"
           "next:\n"
           "  meson setup %s/build %s && ninja -C %s/build\n"
           "  gearbox plugins --plugin-path %s/build\n"
           "  gearbox test-plugin %s/build/%s.so%s\n",
           dir, dir, plan.files[1].file, dir, cuda ? " (and cuda_status.h)" : "", kind, name,
           cuda ? " for the cuda device" : "", dir, dir, dir, dir, dir, plan.module,
           cuda ? "   (on a machine with a GPU)" : "");
    return 0;
}
