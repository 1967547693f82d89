/* Plugin options: defaults, types, ranges, choices, lists, unknown keys with suggestions. */
#include <string.h>

#include "check.h"
#include "trainer/plugin.h"

static const tr_option_spec specs[] = {
    {.key = "hidden", .type = TR_OPTION_INT, .default_value = "128", .min = 1, .max = 4096, .doc = "width"},
    {.key = "dropout", .type = TR_OPTION_FLOAT, .default_value = "0.1", .min = 0, .max = 0.99, .doc = "p"},
    {.key = "bias", .type = TR_OPTION_BOOL, .default_value = "true", .doc = "use bias"},
    {.key = "activation", .type = TR_OPTION_CHOICE, .default_value = "relu", .choices = "relu|gelu|tanh"},
    {.key = "path", .type = TR_OPTION_STRING, .default_value = NULL, .doc = "data file"},
    {.key = "layers", .type = TR_OPTION_INT_LIST, .default_value = "[512, 512]", .min = 1, .max = 65536},
};
#define N 6

static void expect_error(const char *kv, const char *needle) {
    tr_options *o = NULL;
    const char *args[2] = {"path=x", kv};
    tr_status st = tr_options_create(&o, specs, N, args, 2, "cfg.yaml: model.params");
    CHECK(st == TR_ERR_INVALID && o == NULL, "'%s' refused", kv);
    CHECK(strstr(tr_error_msg(), needle) != NULL, "'%s': message '%s' lacks '%s'", kv, tr_error_msg(), needle);
}

int main(void) {
    tr_options *o;
    const char *args[] = {"hidden=256", "path= data/train.csv ", "activation=gelu", "layers=[784, 10]"};
    CHECK(tr_options_create(&o, specs, N, args, 4, "model.params") == TR_OK, "%s", tr_error_msg());
    CHECK(tr_options_int(o, "hidden") == 256, "int");
    CHECK(tr_options_float(o, "dropout") == 0.1, "float default");
    CHECK(tr_options_bool(o, "bias") == 1, "bool default");
    CHECK(strcmp(tr_options_string(o, "activation"), "gelu") == 0, "choice");
    CHECK(strcmp(tr_options_string(o, "path"), "data/train.csv") == 0, "string trimmed");
    int64_t l[4];
    CHECK(tr_options_int_list(o, "layers", l, 4) == 2 && l[0] == 784 && l[1] == 10, "list");
    CHECK(tr_options_int(o, "nope") == 0 && tr_options_string(o, "hidden") == NULL, "undeclared/wrong type");
    tr_options_destroy(o);

    expect_error("hiden=3", "model.params.hiden: unknown option (did you mean 'hidden'?)");
    expect_error("colour=3", "unknown option (options: hidden, dropout, bias, activation, path, layers)");
    expect_error("hidden=abc", "model.params.hidden: expected an integer, got 'abc'");
    expect_error("hidden=0", "model.params.hidden: must be between 1 and 4096, got 0");
    expect_error("dropout=nan", "expected a number, got 'nan'");
    expect_error("bias=maybe", "expected true or false, got 'maybe'");
    expect_error("activation=swish", "expected one of relu|gelu|tanh, got 'swish'");
    expect_error("layers=[1, x]", "expected an integer, got 'x'");
    expect_error("layers=[1, 2", "expected a list like [1, 2]");
    expect_error("path=y", "path: given twice");
    expect_error("novalue", "'novalue' is not key=value");
    const char *none[] = {"hidden=3"};
    CHECK(tr_options_create(&o, specs, N, none, 1, "model.params") == TR_ERR_INVALID &&
              strstr(tr_error_msg(), "model.params.path: required option is missing (data file)"),
          "required: %s", tr_error_msg());
    return test_finish();
}
