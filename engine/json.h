/* A small JSON reader (RFC 8259) for the headers and configs of model files: the
 * safetensors header and Hugging Face's config.json. It parses a whole text into a tree
 * and refuses anything else than one value with blanks around it, nesting deeper than
 * GB_JSON_MAX_DEPTH, and strings that are not valid UTF-8 once unescaped or hold NUL. */
#ifndef GB_CORE_JSON_H
#define GB_CORE_JSON_H

#include <stddef.h>
#include <stdint.h>

#define GB_JSON_MAX_DEPTH 64

typedef enum gb_json_type {
    GB_JSON_NULL,
    GB_JSON_BOOL,
    GB_JSON_NUMBER,
    GB_JSON_STRING,
    GB_JSON_ARRAY,
    GB_JSON_OBJECT
} gb_json_type;

typedef struct gb_json {
    gb_json_type type;
    char *key;              /* the member's name inside an object, else NULL */
    char *string;           /* STRING: unescaped, NUL-terminated */
    double number;          /* NUMBER; BOOL: 0 or 1 */
    int is_integer;         /* NUMBER written without fraction or exponent that fits ... */
    int64_t integer;        /* ... in int64: its exact value (offsets beyond 2^53) */
    struct gb_json *items;  /* ARRAY elements or OBJECT members, in file order */
    size_t count;
} gb_json;

/* The tree of `len` bytes of text, or NULL with what is wrong and the byte offset where
 * in `err`. */
gb_json *gb_json_parse(const char *text, size_t len, char *err, size_t err_cap);
void gb_json_free(gb_json *value);

/* The member `key` of an object (the first, if repeated), or NULL. */
const gb_json *gb_json_member(const gb_json *object, const char *key);

#endif
