/* Unit tests of the config layer: parsing with positions, typed reads and their messages,
 * unknown keys, duplicate keys, syntax errors, overrides, and the write -> parse round trip. */
#define _POSIX_C_SOURCE 200809L /* open_memstream, mkstemp, fdopen */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "trainer/config.h"

#define MSG_IS(expect) CHECK(strcmp(tr_error_msg(), expect) == 0, "message: %s", tr_error_msg())

static tr_config *parse(const char *text) {
    tr_config *cfg = NULL;
    tr_status st = tr_config_parse(&cfg, text, strlen(text), "cfg.yaml");
    CHECK(st == TR_OK, "parse failed: %s", tr_error_msg());
    return cfg;
}

static const char *DOC = "run:\n"                          /* 1 */
                         "  name: demo\n"                  /* 2 */
                         "model:\n"                        /* 3 */
                         "  name: mlp\n"                   /* 4 */
                         "  params:\n"                     /* 5 */
                         "    hidden: 128\n"               /* 6 */
                         "    act: 'relu'\n"               /* 7 */
                         "data:\n"                         /* 8 */
                         "  train:\n"                      /* 9 */
                         "    files: [a.bin, b.bin, c.bin]\n" /* 10 */
                         "optimizer:\n"                    /* 11 */
                         "  lr: 3e-4\n"                    /* 12 */
                         "  wd: .5\n"                      /* 13 */
                         "  beta: 1\n"                     /* 14 */
                         "  bad: abc\n"                    /* 15 */
                         "  big: inf\n"                    /* 16 */
                         "  nan: nan\n"                    /* 17 */
                         "trainer:\n"                      /* 18 */
                         "  max_epochs: 0\n"               /* 19 */
                         "  steps: abc\n"                  /* 20 */
                         "  fast: yes\n"                   /* 21 */
                         "  slow: Off\n"                   /* 22 */
                         "  maybe: perhaps\n"              /* 23 */
                         "  precision: bf16\n"             /* 24 */
                         "  device: tpu\n"                 /* 25 */
                         "  nothing:\n"                    /* 26 */
                         "  sub: {a: 1}\n"                 /* 27 */
                         "empty: {}\n";                    /* 28 */

static void test_parse(void) {
    tr_config *cfg = parse(DOC);
    if (!cfg) return;
    const tr_cfg_node *root = tr_config_root(cfg);
    CHECK(tr_cfg_node_kind(root) == TR_CFG_MAP && tr_cfg_size(root) == 6, "root has 6 keys");
    CHECK(strcmp(tr_cfg_key(root, 0), "run") == 0 && strcmp(tr_cfg_key(root, 5), "empty") == 0,
          "keys in document order");
    const tr_cfg_node *h = tr_config_find(cfg, "model.params.hidden");
    CHECK(h && strcmp(tr_cfg_scalar(h), "128") == 0, "hidden = 128");
    CHECK(h && tr_cfg_line(h) == 6 && tr_cfg_column(h) == 13, "hidden at 6:13, got %d:%d",
          tr_cfg_line(h), tr_cfg_column(h));
    CHECK(h && strcmp(tr_cfg_path(h), "model.params.hidden") == 0, "path %s", tr_cfg_path(h));
    CHECK(h && strcmp(tr_cfg_source(h), "cfg.yaml") == 0, "source");
    const tr_cfg_node *files = tr_config_find(cfg, "data.train.files");
    CHECK(tr_cfg_node_kind(files) == TR_CFG_SEQ && tr_cfg_size(files) == 3, "files is a list");
    const tr_cfg_node *f2 = tr_cfg_item(files, 2);
    CHECK(f2 && strcmp(tr_cfg_scalar(f2), "c.bin") == 0, "files[2]");
    CHECK(f2 && strcmp(tr_cfg_path(f2), "data.train.files[2]") == 0, "item path %s",
          tr_cfg_path(f2));
    CHECK(f2 && tr_cfg_line(f2) == 10 && tr_cfg_column(f2) == 27, "item at 10:27, got %d:%d",
          tr_cfg_line(f2), tr_cfg_column(f2));
    CHECK(tr_config_find(cfg, "data.train.files[1]") == tr_cfg_item(files, 1), "find [1]");
    CHECK(tr_config_find(cfg, "data.train.files[3]") == NULL, "find out of range");
    CHECK(tr_config_find(cfg, "model.nope") == NULL, "absent key");
    CHECK(tr_config_find(cfg, "model..name") == NULL, "malformed find");
    CHECK(tr_cfg_child(tr_config_find(cfg, "model"), "name") == tr_config_find(cfg, "model.name"),
          "child");
    CHECK(tr_cfg_child(h, "x") == NULL && tr_cfg_scalar(files) == NULL, "kind-safe accessors");
    CHECK(tr_cfg_size(tr_config_find(cfg, "empty")) == 0, "empty map");
    tr_config_destroy(cfg);

    /* An empty or comment-only file is an empty config. */
    tr_config *e = NULL;
    CHECK(tr_config_parse(&e, "# nothing\n", 10, "e.yaml") == TR_OK && e &&
              tr_cfg_size(tr_config_root(e)) == 0,
          "empty file: %s", tr_error_msg());
    tr_config_destroy(e);
}

static void test_typed(void) {
    tr_config *cfg = parse(DOC);
    if (!cfg) return;
    const tr_cfg_node *root = tr_config_root(cfg);
    const tr_cfg_node *tr = tr_config_find(cfg, "trainer");
    int64_t i = -1;
    double d = -1;
    int b = -1, c = -1;
    const char *s = NULL;

    CHECK(tr_cfg_get_int(root, "model.params.hidden", 0, 1, 4096, &i, 1) == TR_OK && i == 128,
          "hidden %lld", (long long)i);
    CHECK(tr_cfg_get_int(tr, "max_epochs", 10, 1, 100000, &i, 0) == TR_ERR_INVALID, "range");
    MSG_IS("cfg.yaml:19:15: trainer.max_epochs: must be between 1 and 100000, got 0");
    CHECK(tr_cfg_get_int(root, "trainer.steps", 10, 1, 100, &i, 0) == TR_ERR_INVALID, "not int");
    MSG_IS("cfg.yaml:20:10: trainer.steps: expected an integer, got 'abc'");
    CHECK(tr_cfg_get_int(tr, "sub", 1, 0, 9, &i, 0) == TR_ERR_INVALID, "map is not int");
    MSG_IS("cfg.yaml:27:8: trainer.sub: expected an integer, got a mapping");
    CHECK(tr_cfg_get_int(tr, "absent", 7, 0, 9, &i, 0) == TR_OK && i == 7, "int default");
    CHECK(tr_cfg_get_int(tr, "nothing", 5, 0, 9, &i, 0) == TR_OK && i == 5, "null is absent");
    CHECK(tr_cfg_get_int(tr, "max_epochs", 10, 0, 10, &i, 0) == TR_OK && i == 0, "zero ok");

    const tr_cfg_node *opt = tr_config_find(cfg, "optimizer");
    CHECK(tr_cfg_get_float(opt, "lr", 0, 0, 1, &d, 1) == TR_OK && d == 3e-4, "3e-4");
    CHECK(tr_cfg_get_float(opt, "wd", 0, 0, 1, &d, 1) == TR_OK && d == 0.5, ".5");
    CHECK(tr_cfg_get_float(opt, "beta", 0, 0, 1, &d, 1) == TR_OK && d == 1.0, "1");
    CHECK(tr_cfg_get_float(opt, "bad", 0, 0, 1, &d, 1) == TR_ERR_INVALID, "abc");
    MSG_IS("cfg.yaml:15:8: optimizer.bad: expected a number, got 'abc'");
    CHECK(tr_cfg_get_float(opt, "big", 0, 0, 1, &d, 1) == TR_ERR_INVALID, "inf");
    MSG_IS("cfg.yaml:16:8: optimizer.big: expected a number, got 'inf'");
    CHECK(tr_cfg_get_float(opt, "nan", 0, 0, 1, &d, 1) == TR_ERR_INVALID, "nan refused");
    CHECK(tr_cfg_get_float(opt, "beta", 0, 0, 0.9, &d, 1) == TR_ERR_INVALID, "float range");
    MSG_IS("cfg.yaml:14:9: optimizer.beta: must be between 0 and 0.9, got 1");
    CHECK(tr_cfg_get_float(opt, "gone", 0.25, 0, 1, &d, 0) == TR_OK && d == 0.25, "default");

    CHECK(tr_cfg_get_bool(tr, "fast", 0, &b, 1) == TR_OK && b == 1, "yes");
    CHECK(tr_cfg_get_bool(tr, "slow", 1, &b, 1) == TR_OK && b == 0, "Off");
    CHECK(tr_cfg_get_bool(tr, "maybe", 1, &b, 1) == TR_ERR_INVALID, "perhaps");
    MSG_IS("cfg.yaml:23:10: trainer.maybe: expected true or false, got 'perhaps'");
    CHECK(tr_cfg_get_bool(tr, "x", 1, &b, 0) == TR_OK && b == 1, "bool default");

    CHECK(tr_cfg_get_string(root, "model.name", NULL, &s, 1) == TR_OK && strcmp(s, "mlp") == 0,
          "string");
    CHECK(tr_cfg_get_string(root, "model.params.act", NULL, &s, 1) == TR_OK &&
              strcmp(s, "relu") == 0,
          "quoted string");
    /* List items by index ("optimizer.betas[1]"), relative to any mapping. */
    CHECK(tr_cfg_get_string(root, "data.train.files[2]", NULL, &s, 1) == TR_OK && strcmp(s, "c.bin") == 0,
          "indexed item: %s", tr_error_msg());
    CHECK(tr_cfg_get_string(tr_config_find(cfg, "data.train"), "files[0]", NULL, &s, 1) == TR_OK, "files[0]");
    CHECK(tr_cfg_get_string(root, "data.train.files[3]", NULL, &s, 1) == TR_ERR_INVALID, "index out of range");
    MSG_IS("cfg.yaml:10:5: data.train.files[3]: required key is missing");
    CHECK(tr_cfg_get_string(root, "data.train.files", NULL, &s, 1) == TR_ERR_INVALID, "list");
    MSG_IS("cfg.yaml:10:12: data.train.files: expected a string, got a list");

    CHECK(tr_cfg_get_choice(tr, "precision", "fp32|bf16|fp16", "fp32", &c, 0) == TR_OK && c == 1,
          "choice");
    CHECK(tr_cfg_get_choice(tr, "device", "cpu|cuda|auto", "auto", &c, 0) == TR_ERR_INVALID,
          "bad choice");
    MSG_IS("cfg.yaml:25:11: trainer.device: expected cpu, cuda or auto, got 'tpu'");
    CHECK(tr_cfg_get_choice(tr, "zz", "cpu|cuda|auto", "auto", &c, 0) == TR_OK && c == 2,
          "choice default");

    /* Required keys: the parent's position when it exists, else only the source. */
    CHECK(tr_cfg_get_string(root, "model.kind", NULL, &s, 1) == TR_ERR_INVALID, "required");
    MSG_IS("cfg.yaml:4:3: model.kind: required key is missing");
    CHECK(tr_cfg_get_string(root, "strategy.name", NULL, &s, 1) == TR_ERR_INVALID, "required");
    MSG_IS("cfg.yaml: strategy.name: required key is missing");
    CHECK(tr_cfg_get_int(root, "seed", 0, 0, 9, &i, 1) == TR_ERR_INVALID, "required top");
    MSG_IS("cfg.yaml: seed: required key is missing");
    CHECK(tr_cfg_get_int(root, "model.name.x", 0, 0, 9, &i, 0) == TR_ERR_INVALID, "scalar parent");
    MSG_IS("cfg.yaml:4:9: model.name: expected a mapping, got 'mlp'");
    tr_config_destroy(cfg);
}

static void test_keys(void) {
    tr_config *cfg = parse("trainer:\n"
                           "  max_epochs: 3\n"
                           "  precision: fp32\n"
                           "  grad_clipp: 1.0\n"
                           "\n"
                           "\n"
                           "  max_epoch: 3\n");
    if (!cfg) return;
    const tr_cfg_node *tr = tr_config_find(cfg, "trainer");
    static const char *const good[] = {"max_epochs", "precision", "grad_clipp", "max_epoch"};
    CHECK(tr_cfg_check_keys(tr, good, 4) == TR_OK, "all known: %s", tr_error_msg());
    static const char *const allowed[] = {"max_epochs", "precision", "grad_clipp"};
    CHECK(tr_cfg_check_keys(tr, allowed, 3) == TR_ERR_INVALID, "unknown key");
    MSG_IS("cfg.yaml:7:3: trainer.max_epoch: unknown key (did you mean 'max_epochs'?)");
    static const char *const swapped[] = {"max_epochs", "precision", "max_epoch", "grad_cilp"};
    CHECK(tr_cfg_check_keys(tr, swapped, 4) == TR_ERR_INVALID, "transposition");
    MSG_IS("cfg.yaml:4:3: trainer.grad_clipp: unknown key (did you mean 'grad_cilp'?)");
    static const char *const far[] = {"max_epochs", "precision", "max_epoch", "seed", "device"};
    CHECK(tr_cfg_check_keys(tr, far, 5) == TR_ERR_INVALID, "no close key");
    MSG_IS("cfg.yaml:4:3: trainer.grad_clipp: unknown key (allowed keys: max_epochs, precision, "
           "max_epoch, seed, device)");
    CHECK(tr_cfg_check_keys(NULL, far, 5) == TR_OK, "absent section passes");
    tr_config_destroy(cfg);
}

static void expect_parse_error(const char *text, const char *msg) {
    tr_config *cfg = (tr_config *)1;
    CHECK(tr_config_parse(&cfg, text, strlen(text), "cfg.yaml") == TR_ERR_PARSE && cfg == NULL,
          "refused: %s", text);
    MSG_IS(msg);
}

static void test_errors(void) {
    expect_parse_error("trainer:\n  max_epochs: 3\n  lr: 1\n  max_epochs: 4\n",
                       "cfg.yaml:4:3: trainer.max_epochs: duplicate key (first defined at line 2)");
    expect_parse_error("a: 1\nb: [1, 2\nc: 3\n",
                       "cfg.yaml:3:2: did not find expected ',' or ']' (while parsing a flow "
                       "sequence at line 2)");
    expect_parse_error("model:\n  hidden: 3\n bad: 4\n",
                       "cfg.yaml:3:2: did not find expected key (while parsing a block mapping "
                       "at line 1)");
    expect_parse_error("base: &b {x: 1}\nother: *b\n",
                       "cfg.yaml:1:7: base: anchors (&b) are not supported; write the value out");
    expect_parse_error("x: !!str 3\n",
                       "cfg.yaml:1:4: x: tags (tag:yaml.org,2002:str) are not supported; remove "
                       "the tag");
    expect_parse_error("[1, 2]\n",
                       "cfg.yaml:1:1: the top level must be a mapping of sections (run:, model:, "
                       "...)");
    expect_parse_error("{[1]: 2}\n", "cfg.yaml:1:2: only plain keys are supported, not a list or "
                                     "mapping as a key");
    expect_parse_error("a: 1\n---\nb: 2\n",
                       "cfg.yaml:2:1: only one YAML document per file is supported");
    tr_config *cfg = (tr_config *)1;
    CHECK(tr_config_load(&cfg, "/nonexistent/cfg.yaml") == TR_ERR_IO && cfg == NULL, "io");
    CHECK(strstr(tr_error_msg(), "/nonexistent/cfg.yaml: cannot open") == tr_error_msg(), "%s",
          tr_error_msg());
}

static void test_overrides(void) {
    tr_config *cfg = parse(DOC);
    if (!cfg) return;
    const tr_cfg_node *root = tr_config_root(cfg);
    int64_t i = 0;
    double d = 0;
    /* Replace a scalar. */
    CHECK(tr_config_override(cfg, "trainer.max_epochs=3") == TR_OK, "%s", tr_error_msg());
    CHECK(tr_cfg_get_int(root, "trainer.max_epochs", 1, 1, 100000, &i, 1) == TR_OK && i == 3,
          "replaced %lld", (long long)i);
    const tr_cfg_node *n = tr_config_find(cfg, "trainer.max_epochs");
    CHECK(n && strcmp(tr_cfg_source(n), "command line") == 0 && tr_cfg_column(n) == 20,
          "override position %s col %d", tr_cfg_source(n), tr_cfg_column(n));
    CHECK(strcmp(tr_cfg_key(tr_config_find(cfg, "trainer"), 0), "max_epochs") == 0,
          "replaced in place");
    CHECK(tr_config_override(cfg, "optimizer.lr=abc") == TR_OK, "any scalar is stored");
    CHECK(tr_cfg_get_float(root, "optimizer.lr", 0, 0, 1, &d, 1) == TR_ERR_INVALID, "bad lr");
    MSG_IS("command line:1:14: optimizer.lr: expected a number, got 'abc'");
    /* New keys, creating mappings. */
    CHECK(tr_config_override(cfg, "strategy.params.stage=2") == TR_OK, "%s", tr_error_msg());
    CHECK(tr_cfg_get_int(root, "strategy.params.stage", 1, 1, 3, &i, 1) == TR_OK && i == 2,
          "new nested key");
    n = tr_config_find(cfg, "strategy.params");
    CHECK(n && strcmp(tr_cfg_path(n), "strategy.params") == 0 && tr_cfg_column(n) == 10,
          "created map path %s col %d", tr_cfg_path(n), tr_cfg_column(n));
    CHECK(tr_config_set(cfg, "run.tag", "'007'") == TR_OK, "set: %s", tr_error_msg());
    const char *s = NULL;
    CHECK(tr_cfg_get_string(root, "run.tag", NULL, &s, 1) == TR_OK && strcmp(s, "007") == 0,
          "quoted value");
    /* List values. */
    CHECK(tr_config_override(cfg, "data.train.files=[x.bin, y.bin]") == TR_OK, "%s",
          tr_error_msg());
    n = tr_config_find(cfg, "data.train.files[1]");
    CHECK(n && strcmp(tr_cfg_scalar(n), "y.bin") == 0 && tr_cfg_column(n) == 26 &&
              strcmp(tr_cfg_path(n), "data.train.files[1]") == 0,
          "list item col %d path %s", tr_cfg_column(n), tr_cfg_path(n));
    CHECK(tr_cfg_size(tr_config_find(cfg, "data.train.files")) == 2, "list replaced");
    CHECK(tr_config_override(cfg, "model.params={hidden: 64}") == TR_OK, "flow map");
    CHECK(tr_cfg_get_int(root, "model.params.hidden", 0, 0, 999, &i, 1) == TR_OK && i == 64 &&
              tr_config_find(cfg, "model.params.act") == NULL,
          "map replaced");
    CHECK(tr_config_override(cfg, "run.note=a=b") == TR_OK &&
              strcmp(tr_cfg_scalar(tr_config_find(cfg, "run.note")), "a=b") == 0,
          "value with '='");
    /* Malformed overrides change nothing. */
    size_t before = tr_cfg_size(root);
    CHECK(tr_config_override(cfg, "a.b") == TR_ERR_INVALID, "no =");
    MSG_IS("override 'a.b': expected key.path=value (e.g. trainer.max_epochs=3)");
    CHECK(tr_config_override(cfg, "=3") == TR_ERR_INVALID, "empty path");
    MSG_IS("override '=3': the key path before '=' is empty");
    CHECK(tr_config_override(cfg, "a..b=1") == TR_ERR_INVALID, "empty segment");
    MSG_IS("override 'a..b=1': empty key at column 3 (a..b or a trailing '.')");
    CHECK(tr_config_override(cfg, "a.=1") == TR_ERR_INVALID, "trailing dot");
    CHECK(tr_config_override(cfg, "trainer.max_epochs.x=1") == TR_ERR_INVALID, "through scalar");
    MSG_IS("override 'trainer.max_epochs.x=1': trainer.max_epochs is a scalar (command line:1:20), "
           "not a mapping");
    CHECK(tr_config_override(cfg, "run.name.x.y=1") == TR_ERR_INVALID, "through scalar 2");
    MSG_IS("override 'run.name.x.y=1': run.name is a scalar (cfg.yaml:2:9), not a mapping");
    CHECK(tr_config_override(cfg, "a.b=[1, 2") == TR_ERR_INVALID, "bad value");
    MSG_IS("override 'a.b=[1, 2': command line:1:10: did not find expected ',' or ']' (while "
           "parsing a flow sequence at line 1)");
    CHECK(tr_config_override(cfg, "a.b=x: y") == TR_ERR_INVALID, "block map value");
    CHECK(tr_cfg_size(root) == before && tr_config_find(cfg, "a") == NULL, "nothing changed");
    CHECK(tr_config_override(cfg, "x=") == TR_OK &&
              tr_cfg_get_int(root, "x", 9, 0, 9, &i, 0) == TR_OK && i == 9,
          "empty value is null");
    tr_config_destroy(cfg);
}

/* List items by index: key[N]=value replaces item N, [length] appends, and an absent list is
 * made with the items before N unset (the job's defaults fill them: optimizer.betas). */
static void test_override_index(void) {
    tr_config *cfg = parse(DOC);
    if (!cfg) return;
    const tr_cfg_node *root = tr_config_root(cfg);
    double d = 0;
    CHECK(tr_config_override(cfg, "data.train.files[1]=z.bin") == TR_OK, "%s", tr_error_msg());
    const tr_cfg_node *n = tr_config_find(cfg, "data.train.files[1]");
    CHECK(n && strcmp(tr_cfg_scalar(n), "z.bin") == 0 && strcmp(tr_cfg_path(n), "data.train.files[1]") == 0 &&
              strcmp(tr_cfg_source(n), "command line") == 0 && tr_cfg_column(n) == 21,
          "item replaced: %s %s col %d", n ? tr_cfg_scalar(n) : "(none)", n ? tr_cfg_path(n) : "", tr_cfg_column(n));
    CHECK(tr_cfg_size(tr_config_find(cfg, "data.train.files")) == 3 &&
              strcmp(tr_cfg_scalar(tr_config_find(cfg, "data.train.files[0]")), "a.bin") == 0 &&
              strcmp(tr_cfg_scalar(tr_config_find(cfg, "data.train.files[2]")), "c.bin") == 0,
          "the other items stay");
    CHECK(tr_config_override(cfg, "data.train.files[3]=d.bin") == TR_OK, "append: %s", tr_error_msg());
    CHECK(tr_cfg_size(tr_config_find(cfg, "data.train.files")) == 4 &&
              strcmp(tr_cfg_scalar(tr_config_find(cfg, "data.train.files[3]")), "d.bin") == 0,
          "[length] appends");
    /* An absent list: made, the items before the index unset. */
    CHECK(tr_config_override(cfg, "optimizer.betas[1]=0.99") == TR_OK, "%s", tr_error_msg());
    n = tr_config_find(cfg, "optimizer.betas");
    CHECK(n && tr_cfg_node_kind(n) == TR_CFG_SEQ && tr_cfg_size(n) == 2, "betas made, %zu items", tr_cfg_size(n));
    CHECK(tr_cfg_get_float(root, "optimizer.betas[1]", 0, 0, 1, &d, 1) == TR_OK && d == 0.99, "betas[1] %g", d);
    CHECK(tr_cfg_get_float(root, "optimizer.betas[0]", 0.9, 0, 1, &d, 0) == TR_OK && d == 0.9, "betas[0] unset: %g", d);
    CHECK(tr_config_set(cfg, "optimizer.betas[0]", "0.8") == TR_OK &&
              tr_cfg_get_float(root, "optimizer.betas[0]", 0, 0, 1, &d, 1) == TR_OK && d == 0.8,
          "set by index: %s", tr_error_msg());
    /* Nested: a key inside an item, a list inside a list. */
    CHECK(tr_config_override(cfg, "model.layers=[{width: 1}, {width: 2}]") == TR_OK, "%s", tr_error_msg());
    CHECK(tr_config_override(cfg, "model.layers[1].width=5") == TR_OK, "%s", tr_error_msg());
    n = tr_config_find(cfg, "model.layers[1].width");
    CHECK(n && strcmp(tr_cfg_scalar(n), "5") == 0 && strcmp(tr_cfg_path(n), "model.layers[1].width") == 0,
          "nested item key");
    CHECK(tr_config_override(cfg, "model.grid=[[1, 2], [3, 4]]") == TR_OK && tr_config_override(cfg, "model.grid[1][0]=9") == TR_OK &&
              strcmp(tr_cfg_scalar(tr_config_find(cfg, "model.grid[1][0]")), "9") == 0,
          "list in a list: %s", tr_error_msg());
    /* Refused, naming the override (the message, when given), and changing nothing. */
    static const char *const refused[][2] = {
        {"data.train.files[7]=x", "override 'data.train.files[7]=x': index 7 is out of range: data.train.files "
                                  "(cfg.yaml:10:12) has 4 items (indices 0 to 3; [4] appends one)"},
        {"model.name[0]=x", "override 'model.name[0]=x': model.name is a scalar (cfg.yaml:4:9), not a list"},
        {"model.params[0]=x", "override 'model.params[0]=x': model.params is a mapping (cfg.yaml:6:5), not a list"},
        {"model.layers[0][0]=x", NULL},
        {"data.train.files[x]=1", "override 'data.train.files[x]=1': a list index at column 17 must be [N], N a whole "
                                  "number from 0 written without leading zeros (e.g. optimizer.betas[1]=0.99)"},
        {"optimizer.betas[01]=0.9", "override 'optimizer.betas[01]=0.9': a list index at column 16 must be [N], N a "
                                    "whole number from 0 written without leading zeros (e.g. optimizer.betas[1]=0.99)"},
        {"model.layers[00]=3", NULL},
        {"data.train.files[-1]=1", NULL},
        {"data.train.files[1=1", NULL},
        {"data.train.files[1]x=1", "override 'data.train.files[1]x=1': character 'x' at column 20 is not allowed in a "
                                   "key path (a list item is key[N], a whole list key=[a, b])"},
        {"[0]=1", "override '[0]=1': a list index at column 1 follows no key (key[N]=value)"},
        {"a.b]=1", NULL},
        {"x.y[99999999]=1", "override 'x.y[99999999]=1': index 99999999 into a list the config does not have: at most "
                            "1024 (set the whole list: key=[a, b, ...])"},
    };
    size_t before = tr_cfg_size(root);
    for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
        CHECK(tr_config_override(cfg, refused[k][0]) == TR_ERR_INVALID, "%s accepted", refused[k][0]);
        if (refused[k][1]) MSG_IS(refused[k][1]);
    }
    CHECK(tr_cfg_size(root) == before && tr_cfg_size(tr_config_find(cfg, "data.train.files")) == 4 &&
              tr_config_find(cfg, "a") == NULL,
          "nothing changed");
    tr_config_destroy(cfg);
}

/* A UTF-8 byte order mark is accepted and takes no column. */
static void test_bom(void) {
    const char *text = "\xef\xbb\xbfrun:\n  name: demo\n";
    tr_config *cfg = NULL;
    CHECK(tr_config_parse(&cfg, text, strlen(text), "bom.yaml") == TR_OK, "BOM: %s", tr_error_msg());
    const tr_cfg_node *run = tr_config_find(cfg, "run");
    CHECK(run && tr_cfg_size(run) == 1 && strcmp(tr_cfg_key(tr_config_root(cfg), 0), "run") == 0, "the key is 'run'");
    static const char *const allowed[] = {"model"};
    CHECK(tr_cfg_check_keys(tr_config_root(cfg), allowed, 1) == TR_ERR_INVALID, "unknown key");
    MSG_IS("bom.yaml:1:1: run: unknown key (allowed keys: model)");
    tr_config_destroy(cfg);
}

/* Same kind, keys, order and text everywhere. */
static int same_tree(const tr_cfg_node *a, const tr_cfg_node *b) {
    if (tr_cfg_node_kind(a) != tr_cfg_node_kind(b)) return 0;
    if (tr_cfg_node_kind(a) == TR_CFG_SCALAR) return strcmp(tr_cfg_scalar(a), tr_cfg_scalar(b)) == 0;
    if (tr_cfg_size(a) != tr_cfg_size(b)) return 0;
    for (size_t i = 0; i < tr_cfg_size(a); i++) {
        if (tr_cfg_node_kind(a) == TR_CFG_MAP && strcmp(tr_cfg_key(a, i), tr_cfg_key(b, i)) != 0)
            return 0;
        if (!same_tree(tr_cfg_item(a, i), tr_cfg_item(b, i))) return 0;
    }
    return 1;
}

static tr_config *reparse_written(const tr_config *cfg, char **text_out) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f && tr_config_write(cfg, f) == TR_OK, "write");
    fclose(f);
    tr_config *back = NULL;
    CHECK(tr_config_parse(&back, buf, len, "written.yaml") == TR_OK, "reparse: %s\n%s",
          tr_error_msg(), buf);
    *text_out = buf;
    return back;
}

static void test_round_trip(void) {
    tr_config *cfg = parse(DOC);
    if (!cfg) return;
    CHECK(tr_config_override(cfg, "run.tricky=\"a: b # c\"") == TR_OK, "%s", tr_error_msg());
    CHECK(tr_config_set(cfg, "run.lines", "\"l1\\nl2\\t\\\"q\\\" \\\\ \"") == TR_OK, "%s",
          tr_error_msg());
    CHECK(tr_config_set(cfg, "run.words", "['- x', '', '#h', 'yes', ': z', '---', ' lead', "
                                          "[1, [2, 3], {k: v}], {a: [], b: {}}]") == TR_OK,
          "%s", tr_error_msg());
    CHECK(tr_config_set(cfg, "run.utf8", "'héllo'") == TR_OK, "%s", tr_error_msg());
    char *text = NULL;
    tr_config *back = reparse_written(cfg, &text);
    CHECK(back && same_tree(tr_config_root(cfg), tr_config_root(back)), "round trip:\n%s", text);
    const tr_cfg_node *lines = tr_config_find(back, "run.lines");
    CHECK(lines && strcmp(tr_cfg_scalar(lines), "l1\nl2\t\"q\" \\ ") == 0, "escapes");
    /* Writing the re-parsed tree gives the same text. */
    char *text2 = NULL;
    tr_config *back2 = back ? reparse_written(back, &text2) : NULL;
    CHECK(text2 && strcmp(text, text2) == 0, "stable output:\n%s\n---\n%s", text, text2);
    free(text);
    free(text2);
    tr_config_destroy(back2);
    tr_config_destroy(back);

    /* Keys that need quoting. */
    tr_config *odd = parse("\"odd key\": 1\n'#k': {'a: b': [x]}\n\"\": '- y'\n'---': ''\n");
    char *t4 = NULL;
    tr_config *oddb = odd ? reparse_written(odd, &t4) : NULL;
    CHECK(oddb && same_tree(tr_config_root(odd), tr_config_root(oddb)), "odd keys:\n%s", t4);
    CHECK(oddb && tr_config_find(oddb, "#k") != NULL, "quoted key kept");
    free(t4);
    tr_config_destroy(oddb);
    tr_config_destroy(odd);

    /* Save and load through a file. */
    char path[] = "/tmp/tr_config_test_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd >= 0) {
        fclose(fdopen(fd, "w"));
        CHECK(tr_config_save(cfg, path) == TR_OK, "save: %s", tr_error_msg());
        tr_config *loaded = NULL;
        CHECK(tr_config_load(&loaded, path) == TR_OK, "load: %s", tr_error_msg());
        CHECK(loaded && same_tree(tr_config_root(cfg), tr_config_root(loaded)), "file round trip");
        tr_config_destroy(loaded);
        remove(path);
    }
    tr_config *empty = NULL;
    CHECK(tr_config_create(&empty) == TR_OK, "create");
    char *t3 = NULL;
    tr_config *eb = reparse_written(empty, &t3);
    CHECK(t3 && strcmp(t3, "{}\n") == 0 && eb && tr_cfg_size(tr_config_root(eb)) == 0, "empty");
    free(t3);
    tr_config_destroy(eb);
    tr_config_destroy(empty);
    tr_config_destroy(cfg);
}

/* ~1 MB: 100 sections of 100 keys with long values. */
static void test_large(void) {
    size_t cap = 2u << 20, len = 0;
    char *buf = malloc(cap);
    if (!buf) return;
    for (int s = 0; s < 100; s++) {
        len += (size_t)snprintf(buf + len, cap - len, "section_%d:\n", s);
        for (int k = 0; k < 100; k++)
            len += (size_t)snprintf(buf + len, cap - len,
                                    "  key_%d: value_%d_%d_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                                    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n",
                                    k, s, k);
    }
    CHECK(len > 1000000, "document is %zu bytes", len);
    tr_config *cfg = NULL;
    CHECK(tr_config_parse(&cfg, buf, len, "big.yaml") == TR_OK, "%s", tr_error_msg());
    const tr_cfg_node *n = tr_config_find(cfg, "section_99.key_99");
    CHECK(n && strncmp(tr_cfg_scalar(n), "value_99_99_", 12) == 0 && tr_cfg_line(n) == 100 * 101,
          "last key at line %d", tr_cfg_line(n));
    size_t total = 0;
    const tr_cfg_node *root = tr_config_root(cfg);
    for (size_t i = 0; i < tr_cfg_size(root); i++) total += tr_cfg_size(tr_cfg_item(root, i));
    CHECK(total == 10000, "10k keys, got %zu", total);
    tr_config_destroy(cfg);
    free(buf);
}

int main(void) {
    test_parse();
    test_typed();
    test_keys();
    test_errors();
    test_overrides();
    test_override_index();
    test_bom();
    test_round_trip();
    test_large();
    return test_finish();
}
