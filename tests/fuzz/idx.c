/* Fuzz target `idx`: the IDX dataset plugin (plugins/datasets/idx) reading an image file and a
 * label file, plain or gzip, with its options. Input: "OPTIONS\n--8<--\nIMAGES\n--8<--\nLABELS"
 * (dataset_check.c). Covers header checks, truncation, counts, labels against `classes`,
 * first/count ranges, and every accepted sample against the spec. */
#include "fuzz.h"

const tr_plugin_desc *trainer_plugin_entry(void);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const files[] = {"images", "labels", NULL};
    fuzz_dataset_run(trainer_plugin_entry(), files, NULL, data, size);
    return 0;
}
