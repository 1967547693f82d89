/* Fuzz target `config`: a YAML config as `trainer run` reads it before it looks for plugins:
 * the libyaml-based parser (core/src/config/config.c) and, on a config that parses, every
 * setting read and checked by job_read_settings (core/src/run/job_settings.c: known sections and keys,
 * typed values, ranges, devices, optimizer, scheduler). Both the parsed and the resolved
 * config (defaults filled in) must survive tr_config_write and a parse back unchanged, and
 * reading the resolved config again must give the same settings (config_check.c). Refusals
 * must name the file. Input: the config text. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const needles[] = {"fuzz.yaml", NULL};
    tr_config *cfg;
    tr_error_clear();
    if (tr_config_parse(&cfg, (const char *)data, size, "fuzz.yaml") != TR_OK) {
        fuzz_expect_message("parse", needles);
        return 0;
    }
    tr_config_destroy(fuzz_check_config_roundtrip(cfg, "parsed config"));
    fuzz_check_job_settings(cfg, needles);
    tr_config_destroy(cfg);
    return 0;
}
