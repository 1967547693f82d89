/* Fuzz target `text`: the text dataset plugin (plugins/datasets/text) in its three modes (lm,
 * classify, pairs) with seq_len and stride; a second file part is a tokenizer.json (classify
 * and pairs as token ids, token_table.c). Input: "OPTIONS\n--8<--\nTEXT[\n--8<--\nTOKENIZER]"
 * (dataset_check.c).
 * seq_len is kept to 4096 bytes so that a sample table stays small; every accepted sample
 * must hold byte tokens, valid class ids or finite scores. */
#include "fuzz.h"

const tr_plugin_desc *trainer_plugin_entry(void);

static int fits(const tr_options *o) { return tr_options_int(o, "seq_len") <= 4096 && tr_options_int(o, "max_length") <= 4096; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const files[] = {"path", "tokenizer", NULL};
    fuzz_dataset_run(trainer_plugin_entry(), files, fits, data, size);
    return 0;
}
