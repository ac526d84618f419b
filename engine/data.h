/* An open data folder as the engine's code reads it: the struct behind the handle of
 * gearbox/engine/data.h, its token files mapped. */
#ifndef GB_CORE_DATA_H
#define GB_CORE_DATA_H

#include "gearbox/engine/data.h"
#include "settings.h"

/* One mapped token file: its ids are tokens of its split from `first` on. */
typedef struct gb_token_file {
    char *path;
    const unsigned char *map;
    size_t map_bytes;
    const uint16_t *ids;          /* within map, past any header */
    int64_t first, length;
} gb_token_file;

typedef struct gb_token_stream {
    gb_token_file *files;         /* in stream order */
    int n_files;
    int64_t length;               /* tokens in all files */
} gb_token_stream;

typedef struct gb_dataset {
    gb_data_format format;
    gb_tokenizer tokenizer;       /* bytes or gpt2, never auto */
    char *vocab_path;             /* the GPT-2 vocabulary files, or NULL when none is known */
    int64_t id_limit;             /* every id must be below this */
    gb_token_stream split[2];     /* indexed by gb_split */
    gb_vocab vocab;
} gb_dataset;

#endif
