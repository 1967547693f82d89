/* Fuzz target `csv`: the CSV dataset plugin (plugins/datasets/csv) reading a table and, when
 * the input has a third part, a validation table (val_path), with its options (header, label,
 * normalize, task). Input: "OPTIONS\n--8<--\nCSV[\n--8<--\nVAL_CSV]" (dataset_check.c). Every
 * accepted sample must have finite features and a valid class id or finite target. */
#include "fuzz.h"

const tr_plugin_desc *trainer_plugin_entry(void);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const files[] = {"path", "val_path", NULL};
    fuzz_dataset_run(trainer_plugin_entry(), files, NULL, data, size);
    return 0;
}
