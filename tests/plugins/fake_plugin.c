/* Test plugins for the loader, one source built several ways (tests/CMakeLists.txt):
 *   FAKE_NAME      the plugin's name
 *   FAKE_KIND      its kind
 *   FAKE_ABI       the ABI major it claims (default: this SDK's)
 *   FAKE_ABI_MINOR the ABI minor it claims (default: this SDK's)
 *   FAKE_NO_ENTRY  export no entry symbol at all
 *   FAKE_NEEDS_NEW call a function no libtrainer has (one of a newer ABI), so that dlopen with
 *                  RTLD_NOW fails with "undefined symbol" */
#include "trainer/plugin.h"

#ifndef FAKE_ABI
#define FAKE_ABI TR_ABI_MAJOR
#endif
#ifndef FAKE_ABI_MINOR
#define FAKE_ABI_MINOR TR_ABI_MINOR
#endif

typedef struct fake_ops { int (*answer)(void); } fake_ops;

#ifdef FAKE_NEEDS_NEW
void tr_from_a_newer_abi(void); /* what a newer SDK would declare */
static int answer(void) {
    tr_from_a_newer_abi();
    return 42;
}
#else
static int answer(void) { return 42; }
#endif

static const fake_ops ops = {.answer = answer};

static const tr_option_spec options[] = {
    {.key = "hidden", .type = TR_OPTION_INT, .default_value = "128", .min = 1, .max = 65536,
     .doc = "width of the hidden layer"},
    {.key = "activation", .type = TR_OPTION_CHOICE, .default_value = "relu",
     .choices = "relu|gelu|tanh", .doc = "nonlinearity"},
};

static const tr_plugin_desc desc = {
    .abi_major = FAKE_ABI,
    .abi_minor = FAKE_ABI_MINOR,
    .struct_size = sizeof(tr_plugin_desc),
    .kind = FAKE_KIND,
    .name = FAKE_NAME,
    .version = "1.2.3",
    .description = "a plugin for the loader tests",
    .options = options,
    .n_options = 2,
    .ops = &ops,
    .ops_size = sizeof ops,
};

#ifndef FAKE_NO_ENTRY
TR_PLUGIN_DEFINE(desc)
#else
/* Keeps the descriptor referenced so the build does not warn. */
TR_PLUGIN_EXPORT const void *not_the_entry(void);
TR_PLUGIN_EXPORT const void *not_the_entry(void) { return &desc; }
#endif
