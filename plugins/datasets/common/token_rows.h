/* The rows of a tokenized text table's file (token_table.c's reading half): CSV/TSV after
 * RFC 4180, JSON Lines and the text plugin's tab-separated lines, read into (text, pair,
 * label) cells of one string buffer. Compiled into each plugin with token_table.c. */
#ifndef TRAINER_TOKEN_ROWS_H
#define TRAINER_TOKEN_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "token_table.h"

enum { COL_TEXT, COL_PAIR, COL_LABEL, N_COLS };

/* The rows of a file: the selected cells as offsets into one string buffer. */
typedef struct rows {
    int64_t n, cap;
    size_t (*at)[N_COLS];     /* (n) offset of each cell in str; (size_t)-1: absent */
    size_t (*len)[N_COLS];
    int64_t *line;            /* (n) file line the row starts on */
    char *str;
    size_t str_n, str_cap;
    int optional;             /* the label column may be absent (a validation file for predict) */
    int unlabelled;           /* it is: no row has a label */
} rows;

void tt_rows_free(rows *r);
/* Row i's cell of column c (NUL-terminated), or NULL when the file has none. */
const char *tt_cell(const rows *r, int64_t i, int c);
/* Reads path as c says into out. out->optional: the label column may be absent
 * (out->unlabelled says whether it is). */
tr_status tt_read_rows(const char *path, const tt_config *c, rows *out);

#endif
