/* Fuzz target `plugin_desc`: the checks tr_plugin_open runs on a plugin's descriptor
 * (plugin_desc_check, core/src/plugin/loader.c and options.c), on a descriptor built from the
 * input instead of a dlopen'ed .so: ABI numbers, size, kind, name, strings that may be NULL,
 * an option table (keys, types, defaults, ranges, choices) and an ops table. A descriptor the
 * checks accept must then work: a strategy's ops table goes through job_strategy_ops, the
 * options resolve from their defaults alone when every option has one, and "key=value" words
 * from the rest of the input resolve to values that read back as given and within range.
 * Input layout: the fields in struct order as bytes (fuzz_reader), then one option word per
 * line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "plugin/plugin_impl.h"
#include "run/job.h"
#include "trainer/strategy.h"

#define MAX_OPTIONS 8
#define MAX_WORDS 16
#define OPS_SLOTS 64
#define PATH "fuzz/plugin.so"

static void dummy_op(void) {}

typedef struct built {
    tr_plugin_desc d;
    tr_option_spec opt[MAX_OPTIONS];
    char *strings[3 + 4 * MAX_OPTIONS];
    int n_strings;
    void (*ops[OPS_SLOTS])(void);
} built;

static char *keep(built *b, char *s) {
    b->strings[b->n_strings++] = s;
    return s;
}

static void build(built *b, fuzz_reader *r) {
    memset(b, 0, sizeof *b);
    uint8_t pick = fuzz_u8(r);
    /* Mostly the right version and size, so that the checks past them are reached. */
    b->d.abi_major = pick & 1 ? fuzz_u32(r) : TR_ABI_MAJOR;
    b->d.abi_minor = pick & 2 ? fuzz_u32(r) : (uint32_t)TR_ABI_MINOR - (fuzz_u8(r) & 1);
    b->d.struct_size = pick & 4 ? fuzz_u32(r) : (uint32_t)sizeof(tr_plugin_desc);
    b->d.kind = (tr_plugin_kind)(fuzz_u8(r) % 8);
    b->d.name = keep(b, fuzz_str(r, 80));
    b->d.version = keep(b, fuzz_str(r, 16));
    b->d.description = keep(b, fuzz_str(r, 16));
    uint8_t no = fuzz_u8(r);
    b->d.n_options = no % (MAX_OPTIONS + 1);
    b->d.options = no == 0xff ? NULL : b->opt;
    for (uint32_t i = 0; i < b->d.n_options; i++) {
        tr_option_spec *o = &b->opt[i];
        o->key = keep(b, fuzz_str(r, 140));
        o->type = (tr_option_type)(fuzz_u8(r) % 7);
        o->default_value = keep(b, fuzz_str(r, 40));
        o->doc = keep(b, fuzz_str(r, 8));
        o->min = fuzz_double(r);
        o->max = fuzz_double(r);
        o->choices = keep(b, fuzz_str(r, 40));
    }
    uint32_t filled = fuzz_u32(r), holes = fuzz_u32(r);
    for (int i = 0; i < OPS_SLOTS; i++) b->ops[i] = i < 32 && (holes >> i & 1) ? NULL : dummy_op;
    b->d.ops = filled & 1 ? NULL : b->ops;
    b->d.ops_size = (filled >> 1) % (uint32_t)(sizeof b->ops + 1);
}

static void unbuild(built *b) {
    for (int i = 0; i < b->n_strings; i++) free(b->strings[i]);
}

/* A value tr_options_create accepted, read back through the typed getters. */
static void check_value(const tr_options *o, const tr_option_spec *sp, const char *given) {
    int bounded = sp->min != 0 || sp->max != 0;
    switch (sp->type) {
    case TR_OPTION_INT: {
        int64_t v = tr_options_int(o, sp->key);
        if (bounded && ((double)v < sp->min || (double)v > sp->max))
            fuzz_fail("option '%s' = %lld outside [%g, %g]", sp->key, (long long)v, sp->min, sp->max);
        break;
    }
    case TR_OPTION_FLOAT: {
        double v = tr_options_float(o, sp->key);
        if (!isfinite(v) || (bounded && (v < sp->min || v > sp->max)))
            fuzz_fail("option '%s' = %g outside [%g, %g]", sp->key, v, sp->min, sp->max);
        break;
    }
    case TR_OPTION_STRING:
    case TR_OPTION_PATH:
    case TR_OPTION_CHOICE: {
        const char *v = tr_options_string(o, sp->key);
        if (!v) fuzz_fail("option '%s' has no string value", sp->key);
        /* Values are trimmed; compare when there is nothing to trim. */
        size_t n = strlen(given);
        if (n && n < 1000 && given[0] > ' ' && given[n - 1] > ' ' && strcmp(v, given) != 0)
            fuzz_fail("option '%s' was given '%s' but reads '%s'", sp->key, given, v);
        break;
    }
    case TR_OPTION_INT_LIST: {
        int64_t items[32];
        int n = tr_options_int_list(o, sp->key, items, 32);
        if (n < 0 || n > 32) fuzz_fail("option '%s' has %d list items", sp->key, n);
        for (int i = 0; i < n; i++)
            if (bounded && ((double)items[i] < sp->min || (double)items[i] > sp->max))
                fuzz_fail("option '%s' item %d = %lld outside [%g, %g]", sp->key, i, (long long)items[i], sp->min, sp->max);
        break;
    }
    case TR_OPTION_BOOL: {
        int v = tr_options_bool(o, sp->key);
        if (v != 0 && v != 1) fuzz_fail("option '%s' bool reads %d", sp->key, v);
        break;
    }
    }
}

static void check_options(const tr_plugin_desc *d, char *words) {
    const char *kv[MAX_WORDS];
    int n = 0;
    for (char *save = NULL, *w = strtok_r(words, "\n", &save); w && n < MAX_WORDS; w = strtok_r(NULL, "\n", &save))
        kv[n++] = w;
    int all_defaults = 1;
    for (uint32_t i = 0; i < d->n_options; i++) all_defaults &= d->options[i].default_value != NULL;
    tr_options *o = NULL;
    tr_error_clear();
    tr_status st = tr_options_create(&o, d->options, d->n_options, NULL, 0, "fuzz.yaml: model.params");
    if ((st == TR_OK) != all_defaults)
        fuzz_fail("options from defaults alone: %s (%s), but %s option has a default", st ? "refused" : "accepted",
                  tr_error_msg(), all_defaults ? "every" : "not every");
    tr_options_destroy(o);
    o = NULL;
    tr_error_clear();
    if (tr_options_create(&o, d->options, d->n_options, kv, n, "fuzz.yaml: model.params") != TR_OK) {
        const char *needles[] = {"fuzz.yaml: model.params", NULL};
        fuzz_expect_message("options", needles);
        return;
    }
    for (uint32_t i = 0; i < d->n_options; i++) {
        const tr_option_spec *sp = &d->options[i];
        const char *given = sp->default_value ? sp->default_value : "";
        size_t kl = strlen(sp->key);
        for (int k = 0; k < n; k++)
            if (strncmp(kv[k], sp->key, kl) == 0 && kv[k][kl] == '=') given = kv[k] + kl + 1;
        check_value(o, sp, given);
    }
    tr_options_destroy(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_reader r = {data, size};
    built *b = malloc(sizeof *b);
    if (!b) fuzz_fail("out of memory");
    build(b, &r);
    const tr_plugin_desc *d = &b->d;
    tr_error_clear();
    if (plugin_desc_check(PATH, d) != TR_OK) {
        const char *needles[] = {PATH, NULL};
        fuzz_expect_message("descriptor", needles);
    } else {
        if (strcmp(tr_plugin_kind_name(d->kind), "unknown") == 0) fuzz_fail("accepted kind %d", (int)d->kind);
        for (uint32_t i = 0; i < d->n_options; i++) (void)tr_option_type_name(d->options[i].type);
        if (d->kind == TR_PLUGIN_STRATEGY) {
            if (sizeof(tr_strategy_ops) > sizeof b->ops) fuzz_fail("tr_strategy_ops outgrew the fuzz table");
            tr_plugin p = {.desc = d};
            snprintf(p.path, sizeof p.path, "%s", PATH);
            tr_strategy_ops ops;
            tr_error_clear();
            if (job_strategy_ops(&p, &ops) != TR_OK) {
                const char *needles[] = {PATH, NULL};
                fuzz_expect_message("strategy ops", needles);
            } else if (!ops.create || !ops.destroy || !ops.train_micro || !ops.optim_step || !ops.forward || !ops.state) {
                fuzz_fail("a strategy without a required operation was accepted");
            }
        }
        char *words = fuzz_strdup(r.p, r.left);
        check_options(d, words);
        free(words);
    }
    unbuild(b);
    free(b);
    return 0;
}
