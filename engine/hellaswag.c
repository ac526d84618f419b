/* HellaSwag-style multiple choice: the JSONL reader and an ending's loss; see
 * gearbox/engine/hellaswag.h. */
#include "hellaswag.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsutil.h"

/* Bad lines reported before the rest are only counted. */
#define MAX_REPORTED 20

/* `label` as an index below n: an integer, or a string of decimal digits. -1 otherwise. */
static int label_index(const json_t *label, int n)
{
    long long v = -1;
    if (json_is_integer(label))
        v = json_integer_value(label);
    else if (json_is_string(label)) {
        const char *s = json_string_value(label);
        char *end;
        v = *s >= '0' && *s <= '9' && strlen(s) <= 6 ? strtoll(s, &end, 10) : -1;
        if (v >= 0 && *end)
            v = -1;
    }
    return v >= 0 && v < n ? (int)v : -1;
}

/* The item of one JSON line, or the reason it is not one in *why (a static phrase that
 * follows "expected"). */
static int parse_item(json_t *object, gb_hellaswag_item *item, const char **why)
{
    json_t *ctx = json_object_get(object, "ctx"), *endings = json_object_get(object, "endings");
    *why = NULL;
    if (!json_is_object(object))
        *why = "a JSON object with \"ctx\", \"endings\" and \"label\"";
    else if (!json_is_string(ctx))
        *why = "\"ctx\": the context, a string";
    else if (!json_is_array(endings) || json_array_size(endings) < 2 ||
             json_array_size(endings) > GB_HELLASWAG_MAX_ENDINGS)
        *why = "\"endings\": an array of 2 to 16 strings";
    if (*why)
        return -1;
    int n = (int)json_array_size(endings);
    for (int i = 0; i < n; i++)
        if (!json_is_string(json_array_get(endings, (size_t)i))) {
            *why = "\"endings\": an array of 2 to 16 strings";
            return -1;
        }
    item->label = label_index(json_object_get(object, "label"), n);
    if (item->label < 0) {
        *why = "\"label\": the index of the right ending, from 0 to the number of endings - 1";
        return -1;
    }
    item->ctx = strdup(json_string_value(ctx));
    for (int i = 0; i < n; i++)
        item->endings[item->n_endings++] = strdup(json_string_value(json_array_get(endings, (size_t)i)));
    return 0;
}

static void free_item(gb_hellaswag_item *item)
{
    free(item->ctx);
    for (int i = 0; i < item->n_endings; i++)
        free(item->endings[i]);
}

static int item_allocated(const gb_hellaswag_item *item)
{
    int ok = item->ctx != NULL;
    for (int i = 0; i < item->n_endings; i++)
        ok &= item->endings[i] != NULL;
    return ok;
}

/* Line `line_no` (len bytes, no newline) into a new item of `set`; 1 when it was bad (and
 * reported, up to MAX_REPORTED), -1 when memory ran out. */
static int add_line(const char *line, size_t len, int64_t line_no, const char *name,
                    gb_hellaswag *set, int64_t *cap, int bad_so_far, gb_diag *diag)
{
    json_error_t error;
    json_t *object = json_loadb(line, len, JSON_REJECT_DUPLICATES, &error);
    gb_hellaswag_item item = {.line = line_no};
    const char *why = NULL;
    int rc = object ? parse_item(object, &item, &why) : -1;
    json_decref(object);
    if (rc == 0 && !item_allocated(&item))
        rc = -2;
    if (rc == 0 && set->count == *cap) {
        gb_hellaswag_item *grown = realloc(set->items, (size_t)(*cap = *cap ? 2 * *cap : 64) *
                                                           sizeof *grown);
        rc = grown ? 0 : -2;
        set->items = grown ? grown : set->items;
    }
    if (rc == 0) {
        set->items[set->count++] = item;
        return 0;
    }
    free_item(&item);
    if (rc == -2) {
        gb_diag_add(diag, "%s: out of memory reading its items", name);
        return -1;
    }
    if (bad_so_far < MAX_REPORTED && !object)
        gb_diag_add(diag, "%s:%lld: not a JSON object: %s (column %d); expected one HellaSwag "
                    "item per line: {\"ctx\": ..., \"endings\": [...], \"label\": N}", name,
                    (long long)line_no, error.text, error.column);
    else if (bad_so_far < MAX_REPORTED)
        gb_diag_add(diag, "%s:%lld: expected %s", name, (long long)line_no, why);
    return 1;
}

/* Whether a line holds only blanks. */
static int blank(const char *line, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!strchr(" \t\r", line[i]))
            return 0;
    return 1;
}

int gb_hellaswag_parse(const char *text, size_t size, const char *name, gb_hellaswag *set,
                       gb_diag *diag)
{
    *set = (gb_hellaswag){0};
    int64_t cap = 0, line_no = 0;
    int bad = 0, out_of_memory = 0;
    for (const char *line = text; line < text + size && !out_of_memory;) {
        const char *newline = memchr(line, '\n', (size_t)(text + size - line));
        size_t len = newline ? (size_t)(newline - line) : (size_t)(text + size - line);
        line_no++;
        int rc = blank(line, len) ? 0 : add_line(line, len, line_no, name, set, &cap, bad, diag);
        out_of_memory = rc < 0;
        bad += rc > 0;
        line += len + 1;
    }
    if (bad > MAX_REPORTED)
        gb_diag_add(diag, "%s: %d more bad lines", name, bad - MAX_REPORTED);
    if (bad == 0 && !out_of_memory && set->count == 0)
        gb_diag_add(diag, "%s holds no items: expected one HellaSwag item per line, "
                    "{\"ctx\": ..., \"endings\": [...], \"label\": N}", name);
    if (bad || out_of_memory || set->count == 0) {
        gb_hellaswag_free(set);
        return -1;
    }
    return 0;
}

int gb_hellaswag_read(const char *path, gb_hellaswag *set, gb_diag *diag)
{
    unsigned char *text;
    size_t size;
    *set = (gb_hellaswag){0};
    if (gb_read_file_or_say(path, &text, &size, diag))
        return -1;
    int rc = gb_hellaswag_parse((const char *)text, size, path, set, diag);
    free(text);
    return rc;
}

void gb_hellaswag_free(gb_hellaswag *set)
{
    for (int64_t i = 0; i < set->count; i++)
        free_item(&set->items[i]);
    free(set->items);
    *set = (gb_hellaswag){0};
}

/* -log softmax(logits)[target] over v logits, in double. */
static double token_loss(const float *logits, int64_t v, int32_t target)
{
    double max = -INFINITY, total = 0.0;
    for (int64_t i = 0; i < v; i++)
        max = fmax(max, logits[i]);
    for (int64_t i = 0; i < v; i++)
        total += exp((double)logits[i] - max);
    return max + log(total) - (double)logits[target];
}

int gb_hellaswag_ending_loss(gb_model *m, int64_t block_size, int64_t vocab_size,
                             const int32_t *row, int64_t n, int64_t n_ending, double *sum,
                             gb_diag *diag)
{
    if (n_ending < 1 || n_ending > block_size || n_ending >= n) {
        gb_diag_add(diag, "an ending of %lld tokens after %lld of context: the ending must be "
                    "1 to block_size = %lld tokens long, after at least one token",
                    (long long)n_ending, (long long)(n - n_ending), (long long)block_size);
        return -1;
    }
    int64_t skip = n - 1 > block_size ? n - 1 - block_size : 0, T = n - 1 - skip;
    const int32_t *inputs = row + skip;
    float *logits = malloc((size_t)(T * vocab_size) * sizeof *logits);
    int rc = !logits || gb_model_forward(m, inputs, NULL, 1, T, NULL) ||
             gb_model_get_logits(m, logits, 1, T) ? -1 : 0;
    *sum = 0.0;
    /* input position p predicts inputs[p + 1]; the ending is the last n_ending tokens */
    for (int64_t p = T - n_ending; rc == 0 && p < T; p++)
        *sum += token_loss(logits + p * vocab_size, vocab_size, inputs[p + 1]);
    free(logits);
    return rc;
}
