/* The config tree: parsing YAML with libyaml's event API into positioned nodes, lookups, and
 * command-line overrides. Limits: one document whose top level is a mapping; scalar keys
 * only; anchors, aliases and tags are refused (a config should read the same to a person as
 * to the program); nesting is capped at 128 levels so hostile input cannot overflow the stack.
 * Lookups are linear in the number of keys of a mapping, which config sizes make cheap. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "config/node.h"

#define MAX_DEPTH 128
#define MAX_NEW_INDEX 1024 /* the largest index an override may pad a list it makes to */
#define CMDLINE "command line"

struct source {
    struct source *next;
    char name[];
};

struct tr_config {
    tr_cfg_node *root;
    struct source *sources;
};

void tr_cfg_pos_(char *buf, size_t cap, const char *source, int line, int col) {
    if (line > 0)
        snprintf(buf, cap, "%s:%d:%d", source, line, col);
    else
        snprintf(buf, cap, "%s", source);
}

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static char *dup_s(const char *s) { return dup_n(s, strlen(s)); }

static const char *intern(tr_config *cfg, const char *name) {
    for (struct source *s = cfg->sources; s; s = s->next)
        if (strcmp(s->name, name) == 0) return s->name;
    size_t n = strlen(name);
    struct source *s = malloc(sizeof *s + n + 1);
    if (!s) return NULL;
    memcpy(s->name, name, n + 1);
    s->next = cfg->sources;
    cfg->sources = s;
    return s->name;
}

static tr_cfg_node *node_new(tr_cfg_kind kind, const char *source, int line, int col) {
    tr_cfg_node *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->kind = kind;
    n->source = source;
    n->line = line;
    n->col = col;
    return n;
}

static void node_free(tr_cfg_node *n) {
    if (!n) return;
    for (size_t i = 0; i < n->n; i++) node_free(n->kids[i]);
    free(n->kids);
    free(n->text);
    free(n->key);
    free(n->path);
    free(n);
}

static int node_push(tr_cfg_node *parent, tr_cfg_node *kid) {
    if (parent->n == parent->cap) {
        size_t cap = parent->cap ? parent->cap * 2 : 4;
        tr_cfg_node **k = realloc(parent->kids, cap * sizeof *k);
        if (!k) return -1;
        parent->kids = k;
        parent->cap = cap;
    }
    parent->kids[parent->n++] = kid;
    return 0;
}

/* "parent.key", "key" under the root, "parent[i]" for items. */
static char *join_key(const char *parent, const char *key) {
    size_t a = strlen(parent), b = strlen(key);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    if (a) {
        memcpy(p, parent, a);
        p[a] = '.';
        memcpy(p + a + 1, key, b + 1);
    } else {
        memcpy(p, key, b + 1);
    }
    return p;
}

static char *join_index(const char *parent, size_t i) {
    size_t n = strlen(parent) + 24;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s[%zu]", parent, i);
    return p;
}

/* Gives a subtree the paths of its new place (overrides parse values before placing them). */
static int set_paths(tr_cfg_node *n, const char *path) {
    char *p = dup_s(path);
    if (!p) return -1;
    free(n->path);
    n->path = p;
    for (size_t i = 0; i < n->n; i++) {
        tr_cfg_node *k = n->kids[i];
        char *kp = n->kind == TR_CFG_MAP ? join_key(p, k->key) : join_index(p, i);
        if (!kp) return -1;
        int rc = set_paths(k, kp);
        free(kp);
        if (rc) return -1;
    }
    return 0;
}

/* ---- parsing ---- */

typedef struct builder {
    yaml_parser_t parser;
    const char *source;
    int col_off; /* added to libyaml's columns: where the text starts in its argument */
    int value_mode; /* an override value: one line, positions are columns of the argument */
    size_t len;
} builder;

static int mark_line(const builder *b, const yaml_mark_t *m) {
    return b->value_mode ? 1 : (int)m->line + 1;
}
/* libyaml puts the end of an override value on a line of its own: report the argument's end. */
static int mark_col(const builder *b, const yaml_mark_t *m) {
    if (b->value_mode && m->line > 0) return (int)b->len + 1 + b->col_off;
    return (int)m->column + 1 + b->col_off;
}

static tr_status fail_at(const builder *b, const yaml_mark_t *m, tr_status s, const char *path,
                         const char *what) {
    if (path && path[0])
        return tr_error_set(s, "%s:%d:%d: %s: %s", b->source, mark_line(b, m), mark_col(b, m), path,
                            what);
    return tr_error_set(s, "%s:%d:%d: %s", b->source, mark_line(b, m), mark_col(b, m), what);
}

static tr_status next_event(builder *b, yaml_event_t *ev) {
    if (yaml_parser_parse(&b->parser, ev)) return TR_OK;
    const yaml_parser_t *p = &b->parser;
    const char *problem = p->problem ? p->problem : "malformed YAML";
    if (p->error == YAML_MEMORY_ERROR) return tr_error_set(TR_ERR_NOMEM, "%s: out of memory", b->source);
    if (p->context)
        return tr_error_set(TR_ERR_PARSE, "%s:%d:%d: %s (%s at line %d)", b->source,
                            mark_line(b, &p->problem_mark), mark_col(b, &p->problem_mark), problem,
                            p->context, mark_line(b, &p->context_mark));
    if (p->error == YAML_READER_ERROR)
        return tr_error_set(TR_ERR_PARSE, "%s: byte %zu: %s", b->source, p->problem_offset,
                            problem);
    return tr_error_set(TR_ERR_PARSE, "%s:%d:%d: %s", b->source, mark_line(b, &p->problem_mark),
                        mark_col(b, &p->problem_mark), problem);
}

static tr_status refuse_decorations(const builder *b, const yaml_event_t *ev, const char *path) {
    const yaml_char_t *anchor = NULL, *tag = NULL;
    if (ev->type == YAML_SCALAR_EVENT) {
        anchor = ev->data.scalar.anchor;
        tag = ev->data.scalar.tag;
    } else if (ev->type == YAML_SEQUENCE_START_EVENT) {
        anchor = ev->data.sequence_start.anchor;
        tag = ev->data.sequence_start.tag;
    } else if (ev->type == YAML_MAPPING_START_EVENT) {
        anchor = ev->data.mapping_start.anchor;
        tag = ev->data.mapping_start.tag;
    } else if (ev->type == YAML_ALIAS_EVENT) {
        char msg[300];
        snprintf(msg, sizeof msg, "aliases (*%.200s) are not supported; write the value out",
                 (const char *)ev->data.alias.anchor);
        return fail_at(b, &ev->start_mark, TR_ERR_PARSE, path, msg);
    }
    char msg[300];
    if (anchor) {
        snprintf(msg, sizeof msg, "anchors (&%.200s) are not supported; write the value out",
                 (const char *)anchor);
        return fail_at(b, &ev->start_mark, TR_ERR_PARSE, path, msg);
    }
    if (tag) {
        snprintf(msg, sizeof msg, "tags (%.200s) are not supported; remove the tag",
                 (const char *)tag);
        return fail_at(b, &ev->start_mark, TR_ERR_PARSE, path, msg);
    }
    return TR_OK;
}

/* Builds the node that starts with `ev` (consumed here). `path` is borrowed. */
static tr_status parse_node(builder *b, yaml_event_t *ev, const char *path, int depth,
                            tr_cfg_node **out) {
    tr_status st = refuse_decorations(b, ev, path);
    tr_cfg_node *n = NULL;
    char *kpath = NULL;
    yaml_event_t kev, vev;
    *out = NULL;
    if (st) goto done;
    if (depth > MAX_DEPTH) {
        st = fail_at(b, &ev->start_mark, TR_ERR_PARSE, path, "nesting is too deep");
        goto done;
    }
    int line = mark_line(b, &ev->start_mark), col = mark_col(b, &ev->start_mark);
    if (ev->type == YAML_SCALAR_EVENT) {
        if (memchr(ev->data.scalar.value, 0, ev->data.scalar.length)) {
            st = fail_at(b, &ev->start_mark, TR_ERR_PARSE, path, "a NUL character (\\0) in a value is not supported");
            goto done;
        }
        n = node_new(TR_CFG_SCALAR, b->source, line, col);
        if (n) n->text = dup_n((const char *)ev->data.scalar.value, ev->data.scalar.length);
        if (!n || !n->text) goto nomem;
        n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
        if (!(n->path = dup_s(path))) goto nomem;
    } else if (ev->type == YAML_SEQUENCE_START_EVENT) {
        if (!(n = node_new(TR_CFG_SEQ, b->source, line, col)) || !(n->path = dup_s(path)))
            goto nomem;
        for (;;) {
            TR_CHECK_GOTO(next_event(b, &vev), done);
            if (vev.type == YAML_SEQUENCE_END_EVENT) {
                yaml_event_delete(&vev);
                break;
            }
            tr_cfg_node *kid;
            if (!(kpath = join_index(path, n->n))) {
                yaml_event_delete(&vev);
                goto nomem;
            }
            TR_CHECK_GOTO(parse_node(b, &vev, kpath, depth + 1, &kid), done);
            free(kpath);
            kpath = NULL;
            if (node_push(n, kid)) {
                node_free(kid);
                goto nomem;
            }
        }
    } else if (ev->type == YAML_MAPPING_START_EVENT) {
        if (!(n = node_new(TR_CFG_MAP, b->source, line, col)) || !(n->path = dup_s(path)))
            goto nomem;
        for (;;) {
            TR_CHECK_GOTO(next_event(b, &kev), done);
            if (kev.type == YAML_MAPPING_END_EVENT) {
                yaml_event_delete(&kev);
                break;
            }
            if (kev.type != YAML_SCALAR_EVENT) {
                st = kev.type == YAML_ALIAS_EVENT
                         ? refuse_decorations(b, &kev, path)
                         : fail_at(b, &kev.start_mark, TR_ERR_PARSE, path,
                                   "only plain keys are supported, not a list or mapping as a key");
                yaml_event_delete(&kev);
                goto done;
            }
            st = refuse_decorations(b, &kev, path);
            if (!st && memchr(kev.data.scalar.value, 0, kev.data.scalar.length))
                st = fail_at(b, &kev.start_mark, TR_ERR_PARSE, path, "a NUL character (\\0) in a key is not supported");
            char *key = st ? NULL
                           : dup_n((const char *)kev.data.scalar.value, kev.data.scalar.length);
            yaml_mark_t kmark = kev.start_mark;
            yaml_event_delete(&kev);
            if (st) goto done;
            if (!key || !(kpath = join_key(path, key))) {
                free(key);
                goto nomem;
            }
            for (size_t i = 0; i < n->n; i++) {
                if (strcmp(n->kids[i]->key, key) == 0) {
                    char msg[64];
                    snprintf(msg, sizeof msg, "duplicate key (first defined at line %d)",
                             n->kids[i]->key_line);
                    free(key);
                    st = fail_at(b, &kmark, TR_ERR_PARSE, kpath, msg);
                    goto done;
                }
            }
            tr_cfg_node *kid;
            st = next_event(b, &vev);
            if (!st) st = parse_node(b, &vev, kpath, depth + 1, &kid);
            if (st) {
                free(key);
                tr_error_frame(__FILE__, __LINE__);
                goto done;
            }
            free(kpath);
            kpath = NULL;
            kid->key = key;
            kid->key_line = mark_line(b, &kmark);
            kid->key_col = mark_col(b, &kmark);
            if (node_push(n, kid)) {
                node_free(kid);
                goto nomem;
            }
        }
    } else {
        st = fail_at(b, &ev->start_mark, TR_ERR_PARSE, path, "unexpected YAML event");
        goto done;
    }
    *out = n;
    n = NULL;
    goto done;
nomem:
    st = tr_error_set(TR_ERR_NOMEM, "%s: out of memory while parsing", b->source);
done:
    free(kpath);
    node_free(n);
    yaml_event_delete(ev);
    return st;
}

/* Parses a whole stream: a config document (value_mode 0) or an override value. */
static tr_status build(const char *text, size_t len, const char *source, int col_off,
                       int value_mode, tr_cfg_node **out) {
    builder b = {.source = source, .col_off = col_off, .value_mode = value_mode, .len = len};
    yaml_event_t ev;
    tr_cfg_node *root = NULL;
    tr_status st = TR_OK;
    *out = NULL;
    if (!yaml_parser_initialize(&b.parser))
        return tr_error_set(TR_ERR_NOMEM, "%s: cannot initialise the YAML parser", source);
    yaml_parser_set_input_string(&b.parser, (const unsigned char *)text, len);
    yaml_parser_set_encoding(&b.parser, YAML_UTF8_ENCODING);
    TR_CHECK_GOTO(next_event(&b, &ev), done); /* stream start */
    yaml_event_delete(&ev);
    TR_CHECK_GOTO(next_event(&b, &ev), done);
    if (ev.type == YAML_DOCUMENT_START_EVENT) {
        yaml_event_delete(&ev);
        TR_CHECK_GOTO(next_event(&b, &ev), done);
        int block = (ev.type == YAML_MAPPING_START_EVENT &&
                     ev.data.mapping_start.style == YAML_BLOCK_MAPPING_STYLE) ||
                    (ev.type == YAML_SEQUENCE_START_EVENT &&
                     ev.data.sequence_start.style == YAML_BLOCK_SEQUENCE_STYLE);
        yaml_mark_t vmark = ev.start_mark;
        TR_CHECK_GOTO(parse_node(&b, &ev, "", 1, &root), done);
        if (value_mode && block) {
            st = fail_at(&b, &vmark, TR_ERR_PARSE, NULL,
                         "a value must be a scalar, [a, list] or {a: mapping}; quote text "
                         "holding ': ' or a leading '- '");
            goto done;
        }
        if (!value_mode && root->kind == TR_CFG_SCALAR && !root->quoted && !root->text[0]) {
            node_free(root); /* "---" alone: an empty document */
            root = NULL;
        } else if (!value_mode && root->kind != TR_CFG_MAP) {
            st = fail_at(&b, &vmark, TR_ERR_PARSE, NULL,
                         "the top level must be a mapping of sections (run:, model:, ...)");
            goto done;
        }
        TR_CHECK_GOTO(next_event(&b, &ev), done); /* document end */
        yaml_event_delete(&ev);
        TR_CHECK_GOTO(next_event(&b, &ev), done);
        if (ev.type != YAML_STREAM_END_EVENT) {
            st = fail_at(&b, &ev.start_mark, TR_ERR_PARSE, NULL,
                         "only one YAML document per file is supported");
            yaml_event_delete(&ev);
            goto done;
        }
    }
    yaml_event_delete(&ev);
    if (!root) {
        root = node_new(value_mode ? TR_CFG_SCALAR : TR_CFG_MAP, source, value_mode ? 1 : 0,
                        value_mode ? 1 + col_off : 0);
        if (!root || !(root->path = dup_s("")) || (value_mode && !(root->text = dup_s("")))) {
            st = tr_error_set(TR_ERR_NOMEM, "%s: out of memory while parsing", source);
            goto done;
        }
    }
    *out = root;
    root = NULL;
done:
    node_free(root);
    yaml_parser_delete(&b.parser);
    return st;
}

tr_status tr_config_create(tr_config **out) {
    *out = NULL;
    tr_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) return tr_error_set(TR_ERR_NOMEM, "config: out of memory");
    cfg->root = node_new(TR_CFG_MAP, NULL, 0, 0);
    if (!cfg->root || !(cfg->root->path = dup_s("")) ||
        !(cfg->root->source = intern(cfg, CMDLINE))) {
        tr_config_destroy(cfg);
        return tr_error_set(TR_ERR_NOMEM, "config: out of memory");
    }
    *out = cfg;
    return TR_OK;
}

tr_status tr_config_parse(tr_config **out, const char *text, size_t len,
                          const char *source_name) {
    *out = NULL;
    if (!text && len) return tr_error_set(TR_ERR_INVALID, "config: NULL text");
    tr_config *cfg = calloc(1, sizeof *cfg);
    const char *src = cfg ? intern(cfg, source_name ? source_name : "<config>") : NULL;
    if (!src) {
        free(cfg);
        return tr_error_set(TR_ERR_NOMEM, "config: out of memory");
    }
    /* A UTF-8 byte order mark (editors on Windows write one) is not part of the text: libyaml
     * skips it but counts it as a column of line 1. */
    if (text && len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
        text += 3;
        len -= 3;
    }
    tr_status st = build(text ? text : "", len, src, 0, 0, &cfg->root);
    if (st) {
        tr_config_destroy(cfg);
        return st;
    }
    if (cfg->root->line == 0) cfg->root->source = src;
    *out = cfg;
    return TR_OK;
}

tr_status tr_config_load(tr_config **out, const char *path) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return tr_error_set(TR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    tr_status st = TR_OK;
    while (buf) {
        if (len == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) break;
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    if (!buf || (len == cap && !feof(f)))
        st = tr_error_set(TR_ERR_NOMEM, "%s: out of memory reading the file", path);
    else if (ferror(f))
        st = tr_error_set(TR_ERR_IO, "%s: read error: %s", path, strerror(errno));
    fclose(f);
    if (!st) st = tr_config_parse(out, buf, len, path);
    free(buf);
    return st;
}

void tr_config_destroy(tr_config *cfg) {
    if (!cfg) return;
    node_free(cfg->root);
    for (struct source *s = cfg->sources, *nx; s; s = nx) {
        nx = s->next;
        free(s);
    }
    free(cfg);
}

/* ---- lookups and accessors ---- */

const tr_cfg_node *tr_config_root(const tr_config *cfg) { return cfg ? cfg->root : NULL; }

static tr_cfg_node *child_n(const tr_cfg_node *node, const char *key, size_t len) {
    if (!node || node->kind != TR_CFG_MAP) return NULL;
    for (size_t i = 0; i < node->n; i++) {
        const char *k = node->kids[i]->key;
        if (strncmp(k, key, len) == 0 && k[len] == '\0') return node->kids[i];
    }
    return NULL;
}

const tr_cfg_node *tr_cfg_child(const tr_cfg_node *node, const char *key) {
    return key ? child_n(node, key, strlen(key)) : NULL;
}

const tr_cfg_node *tr_cfg_find(const tr_cfg_node *node, const char *path) {
    const char *p = path;
    if (!p) return NULL;
    while (node && *p) {
        size_t len = strcspn(p, ".[");
        if (!len) return NULL;
        node = child_n(node, p, len);
        p += len;
        while (node && *p == '[') {
            char *end;
            errno = 0;
            unsigned long long i = strtoull(p + 1, &end, 10);
            if (end == p + 1 || *end != ']' || errno || node->kind != TR_CFG_SEQ || i >= node->n)
                return NULL;
            node = node->kids[i];
            p = end + 1;
        }
        if (*p == '.') {
            p++;
            if (!*p) return NULL;
        } else if (*p) {
            return NULL;
        }
    }
    return node;
}

const tr_cfg_node *tr_config_find(const tr_config *cfg, const char *path) {
    return cfg ? tr_cfg_find(cfg->root, path) : NULL;
}

tr_cfg_kind tr_cfg_node_kind(const tr_cfg_node *n) { return n ? n->kind : (tr_cfg_kind)0; }
const char *tr_cfg_scalar(const tr_cfg_node *n) {
    return n && n->kind == TR_CFG_SCALAR ? n->text : NULL;
}
size_t tr_cfg_size(const tr_cfg_node *n) { return n && n->kind != TR_CFG_SCALAR ? n->n : 0; }
const char *tr_cfg_key(const tr_cfg_node *n, size_t i) {
    return n && n->kind == TR_CFG_MAP && i < n->n ? n->kids[i]->key : NULL;
}
const tr_cfg_node *tr_cfg_item(const tr_cfg_node *n, size_t i) {
    return n && n->kind != TR_CFG_SCALAR && i < n->n ? n->kids[i] : NULL;
}
const char *tr_cfg_source(const tr_cfg_node *n) { return n && n->source ? n->source : ""; }
int tr_cfg_line(const tr_cfg_node *n) { return n ? n->line : 0; }
int tr_cfg_column(const tr_cfg_node *n) { return n ? n->col : 0; }
const char *tr_cfg_path(const tr_cfg_node *n) { return n && n->path ? n->path : ""; }

/* ---- overrides ---- */

/* Length of the well-formed UTF-8 character at s (no overlong forms or surrogates, at most
 * U+10FFFF; RFC 3629), 0 when ill-formed. s is NUL-terminated. */
static size_t utf8_char(const unsigned char *s) {
    if (s[0] < 0x80) return 1;
    size_t n = s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) || (s[0] == 0xf0 && s[1] < 0x90) ||
        (s[0] == 0xf4 && s[1] >= 0x90))
        return 0;
    return n;
}

/* One step of an override's key path: a mapping key, or a list index (`[i]`). */
typedef struct path_step {
    size_t at, len; /* the key's or the index's text in the argument */
    int is_index;
    size_t index;
} path_step;

/* Splits "a.b[2].c" (the argument's first eq bytes) into steps; an error names the column. */
static tr_status split_path(const char *arg, size_t eq, path_step **out, size_t *n_out) {
    path_step *steps = calloc(eq + 1, sizeof *steps); /* at most one step per byte */
    size_t n = 0, s = 0;
    if (!steps) return tr_error_set(TR_ERR_NOMEM, "config: out of memory");
    tr_status st = TR_OK;
    while (s <= eq && !st) {
        size_t len = strcspn(arg + s, ".=[]");
        if (len > eq - s) len = eq - s;
        if (len == 0) {
            st = arg[s] == '['
                     ? tr_error_set(TR_ERR_INVALID, "override '%s': a list index at column %zu follows no key (key[N]=value)",
                                    arg, s + 1)
                     : tr_error_set(TR_ERR_INVALID, "override '%s': empty key at column %zu (a..b or a trailing '.')", arg,
                                    s + 1);
            break;
        }
        for (size_t i = s; i < s + len && !st; i++) {
            unsigned char c = (unsigned char)arg[i];
            if (c <= ' ' || c == '#' || c == ':')
                st = tr_error_set(TR_ERR_INVALID, "override '%s': character '%c' at column %zu is not allowed in a key path",
                                  arg, c > ' ' ? c : '?', i + 1);
        }
        steps[n++] = (path_step){.at = s, .len = len};
        s += len;
        while (!st && s < eq && arg[s] == '[') {
            size_t d = s + 1;
            while (d < eq && arg[d] >= '0' && arg[d] <= '9') d++;
            unsigned long long v = d > s + 1 && d - s - 1 <= 9 ? strtoull(arg + s + 1, NULL, 10) : 0;
            if (d == s + 1 || d - s - 1 > 9 || d >= eq || arg[d] != ']') {
                st = tr_error_set(TR_ERR_INVALID, "override '%s': a list index at column %zu must be [N], N a whole "
                                                  "number from 0 (e.g. optimizer.betas[1]=0.99)", arg, s + 1);
                break;
            }
            steps[n++] = (path_step){.at = s + 1, .len = d - s - 1, .is_index = 1, .index = (size_t)v};
            s = d + 1;
        }
        if (st) break;
        if (s == eq) break;
        if (arg[s] != '.') {
            st = tr_error_set(TR_ERR_INVALID, "override '%s': character '%c' at column %zu is not allowed in a key path "
                                              "(a list item is key[N], a whole list key=[a, b])", arg, arg[s], s + 1);
            break;
        }
        s++;
        if (s == eq) {
            st = tr_error_set(TR_ERR_INVALID, "override '%s': empty key at column %zu (a..b or a trailing '.')", arg,
                              s + 1);
            break;
        }
    }
    if (st) {
        free(steps);
        return st;
    }
    *out = steps;
    *n_out = n;
    return TR_OK;
}

static const char *kind_word(const tr_cfg_node *n) {
    return n->kind == TR_CFG_SEQ ? "list" : n->kind == TR_CFG_MAP ? "mapping" : "scalar";
}

/* A node made by an override on its way (a mapping or a list), or an unset item (an empty
 * plain scalar, as `key:` alone) padding a list it made; NULL when out of memory. */
static tr_cfg_node *fresh_node(tr_cfg_kind kind, const char *src, int col, const char *path) {
    tr_cfg_node *n = node_new(kind, src, 1, col);
    if (n && !(n->path = dup_s(path))) {
        node_free(n);
        return NULL;
    }
    if (n && kind == TR_CFG_SCALAR && !(n->text = dup_s(""))) {
        node_free(n);
        return NULL;
    }
    return n;
}

/* An override's path goes through `node`, which is not a `want` (list or mapping). Takes val. */
static tr_status not_a(tr_cfg_node *val, const char *arg, const tr_cfg_node *node, const char *want) {
    char pos[300];
    tr_cfg_pos_(pos, sizeof pos, node->source, node->line, node->col);
    node_free(val);
    return tr_error_set(TR_ERR_INVALID, "override '%s': %s is a %s (%s), not a %s", arg, node->path, kind_word(node), pos,
                        want);
}

/* Walks the steps from the root, creating what is absent, and puts val at the end. Errors can
 * only come from nodes that existed before this override, all met before anything is created,
 * so a refused override changes nothing. Takes val. */
static tr_status place(tr_config *cfg, const char *arg, const char *src, const path_step *steps, size_t n_steps,
                       tr_cfg_node *val) {
    tr_cfg_node *node = cfg->root;
    int created = 0; /* node was made by this override: indices beyond its end pad it */
    for (size_t k = 0; k < n_steps; k++) {
        const path_step *sp = &steps[k];
        int last = k + 1 == n_steps;
        tr_cfg_node *kid = NULL;
        size_t slot = 0;
        if (sp->is_index) {
            if (node->kind != TR_CFG_SEQ) return not_a(val, arg, node, "list");
            if (sp->index > node->n && !created) {
                char pos[300];
                tr_cfg_pos_(pos, sizeof pos, node->source, node->line, node->col);
                node_free(val);
                return tr_error_set(TR_ERR_INVALID, "override '%s': index %zu is out of range: %s (%s) has %zu item%s "
                                                    "(indices 0 to %zu; [%zu] appends one)",
                                    arg, sp->index, node->path, pos, node->n, node->n == 1 ? "" : "s",
                                    node->n ? node->n - 1 : 0, node->n);
            }
            while (node->n < sp->index) { /* a list this override made: items before it unset */
                char *ip = join_index(node->path, node->n);
                tr_cfg_node *pad = ip ? fresh_node(TR_CFG_SCALAR, src, (int)sp->at + 1, ip) : NULL;
                free(ip);
                if (!pad || node_push(node, pad)) {
                    node_free(pad);
                    node_free(val);
                    return tr_error_set(TR_ERR_NOMEM, "config: out of memory");
                }
            }
            slot = sp->index;
            kid = slot < node->n ? node->kids[slot] : NULL;
        } else {
            if (node->kind != TR_CFG_MAP) return not_a(val, arg, node, "mapping");
            kid = child_n(node, arg + sp->at, sp->len);
            for (slot = 0; kid && node->kids[slot] != kid; slot++) {}
            if (!kid) slot = node->n;
        }
        /* An unset value (`key:` alone, ~, null) on the way is absent, and made anew. */
        if (!last && kid && tr_cfg_null_(kid)) kid = NULL;
        /* From here on everything is made anew: a list made by an override is padded with
         * unset items up to its index, so the index is capped (a typo's [99999999] would
         * make a hundred million). Refused before anything is made. */
        for (size_t r = k + 1; !last && !kid && r < n_steps; r++)
            if (steps[r].is_index && steps[r].index > MAX_NEW_INDEX) {
                node_free(val);
                return tr_error_set(TR_ERR_INVALID, "override '%s': index %zu into a list the config does not have: at "
                                                    "most %d (set the whole list: key=[a, b, ...])",
                                    arg, steps[r].index, MAX_NEW_INDEX);
            }
        if (last || !kid) {
            char *key = sp->is_index ? NULL : dup_n(arg + sp->at, sp->len);
            char *path = sp->is_index ? join_index(node->path, slot) : key ? join_key(node->path, key) : NULL;
            tr_cfg_node *put = last ? val : fresh_node(steps[k + 1].is_index ? TR_CFG_SEQ : TR_CFG_MAP, src,
                                                       (int)sp->at + 1, path ? path : "");
            if (!path || !put || (last && set_paths(val, path)) || (!sp->is_index && !key)) {
                free(key);
                free(path);
                if (put != val) node_free(put);
                node_free(val);
                return tr_error_set(TR_ERR_NOMEM, "config: out of memory");
            }
            free(path);
            put->key = key;
            put->key_line = key ? 1 : 0;
            put->key_col = key ? (int)sp->at + 1 : 0;
            if (slot < node->n) {
                node_free(node->kids[slot]);
                node->kids[slot] = put;
            } else if (node_push(node, put)) {
                node_free(put);
                if (put != val) node_free(val);
                return tr_error_set(TR_ERR_NOMEM, "config: out of memory");
            }
            if (last) return TR_OK;
            kid = put;
            created = 1;
        } else {
            created = 0;
        }
        node = kid;
    }
    node_free(val);
    return tr_error_set(TR_ERR_INTERNAL, "override '%s': no key path", arg);
}

/* arg is "path=value" with '=' at arg[eq]. */
static tr_status override_at(tr_config *cfg, const char *arg, size_t eq) {
    const char *value = arg + eq + 1;
    const char *src = intern(cfg, CMDLINE);
    if (!src) return tr_error_set(TR_ERR_NOMEM, "config: out of memory");
    if (eq == 0)
        return tr_error_set(TR_ERR_INVALID, "override '%s': the key path before '=' is empty",
                            arg);
    /* The value goes through libyaml, which checks its encoding; the key path does not. */
    for (size_t i = 0, n; i < eq; i += n)
        if (!(n = utf8_char((const unsigned char *)arg + i)))
            return tr_error_set(TR_ERR_INVALID, "override '%s': the key path is not valid UTF-8 (byte %zu)", arg,
                                i + 1);
    /* Validate the whole path before touching the tree, so a bad override changes nothing. */
    path_step *steps = NULL;
    size_t n_steps = 0;
    TR_CHECK(split_path(arg, eq, &steps, &n_steps));
    tr_cfg_node *val;
    tr_status st = build(value, strlen(value), src, (int)eq + 1, 1, &val);
    if (st) {
        free(steps);
        tr_error_prefix("override '%s': ", arg);
        return TR_ERR_INVALID;
    }
    st = place(cfg, arg, src, steps, n_steps, val);
    free(steps);
    return st;
}

tr_status tr_config_override(tr_config *cfg, const char *arg) {
    if (!cfg || !arg) return tr_error_set(TR_ERR_INVALID, "config override: NULL argument");
    const char *eq = strchr(arg, '=');
    if (!eq)
        return tr_error_set(TR_ERR_INVALID,
                            "override '%s': expected key.path=value (e.g. trainer.max_epochs=3)",
                            arg);
    return override_at(cfg, arg, (size_t)(eq - arg));
}

tr_status tr_config_set(tr_config *cfg, const char *path, const char *value) {
    if (!cfg || !path || !value) return tr_error_set(TR_ERR_INVALID, "config set: NULL argument");
    size_t a = strlen(path), b = strlen(value);
    char *arg = malloc(a + b + 2);
    if (!arg) return tr_error_set(TR_ERR_NOMEM, "config: out of memory");
    memcpy(arg, path, a);
    arg[a] = '=';
    memcpy(arg + a + 1, value, b + 1);
    tr_status st = strchr(path, '=')
                       ? tr_error_set(TR_ERR_INVALID, "config set: key path '%s' holds '='", path)
                       : override_at(cfg, arg, a);
    free(arg);
    return st;
}
