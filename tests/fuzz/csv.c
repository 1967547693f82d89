/* Fuzz target `csv`: the CSV dataset plugin (plugins/datasets/csv) reading a table and, when
 * the input has a third part, a validation table (val_path), with its options (header, label,
 * normalize, task); a fourth part is a tokenizer.json (the tokenized tables of
 * token_table.c: RFC 4180 quoting, JSON Lines with format=jsonl). Input:
 * "OPTIONS\n--8<--\nCSV[\n--8<--\nVAL_CSV[\n--8<--\nTOKENIZER]]" (dataset_check.c). Every
 * accepted sample must have finite features and a valid class id or finite target, or token
 * ids in the vocabulary with -1 padding at the end. */
#include "fuzz.h"

const tr_plugin_desc *trainer_plugin_entry(void);

static int fits(const tr_options *o) { return tr_options_int(o, "max_length") <= 4096; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const files[] = {"path", "val_path", "tokenizer", NULL};
    fuzz_dataset_run(trainer_plugin_entry(), files, fits, data, size);
    return 0;
}
