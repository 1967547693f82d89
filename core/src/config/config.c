/* Parsing a config: YAML through libyaml's event API into positioned nodes (node.h). Limits:
 * one document whose top level is a mapping; scalar keys only; anchors, aliases and tags are
 * refused (a config should read the same to a person as to the program); nesting is capped
 * at 128 levels so hostile input cannot overflow the stack. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "config/node.h"

#define MAX_DEPTH 128

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
        n = tr_cfg_node_new_(TR_CFG_SCALAR, b->source, line, col);
        if (n) n->text = tr_cfg_dup_n_((const char *)ev->data.scalar.value, ev->data.scalar.length);
        if (!n || !n->text) goto nomem;
        n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
        if (!(n->path = tr_cfg_dup_(path))) goto nomem;
    } else if (ev->type == YAML_SEQUENCE_START_EVENT) {
        if (!(n = tr_cfg_node_new_(TR_CFG_SEQ, b->source, line, col)) || !(n->path = tr_cfg_dup_(path)))
            goto nomem;
        for (;;) {
            TR_CHECK_GOTO(next_event(b, &vev), done);
            if (vev.type == YAML_SEQUENCE_END_EVENT) {
                yaml_event_delete(&vev);
                break;
            }
            tr_cfg_node *kid;
            if (!(kpath = tr_cfg_join_index_(path, n->n))) {
                yaml_event_delete(&vev);
                goto nomem;
            }
            TR_CHECK_GOTO(parse_node(b, &vev, kpath, depth + 1, &kid), done);
            free(kpath);
            kpath = NULL;
            if (tr_cfg_node_push_(n, kid)) {
                tr_cfg_node_free_(kid);
                goto nomem;
            }
        }
    } else if (ev->type == YAML_MAPPING_START_EVENT) {
        if (!(n = tr_cfg_node_new_(TR_CFG_MAP, b->source, line, col)) || !(n->path = tr_cfg_dup_(path)))
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
                           : tr_cfg_dup_n_((const char *)kev.data.scalar.value, kev.data.scalar.length);
            yaml_mark_t kmark = kev.start_mark;
            yaml_event_delete(&kev);
            if (st) goto done;
            if (!key || !(kpath = tr_cfg_join_key_(path, key))) {
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
            if (tr_cfg_node_push_(n, kid)) {
                tr_cfg_node_free_(kid);
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
    tr_cfg_node_free_(n);
    yaml_event_delete(ev);
    return st;
}

tr_status tr_cfg_build_(const char *text, size_t len, const char *source, int col_off,
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
            tr_cfg_node_free_(root); /* "---" alone: an empty document */
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
        root = tr_cfg_node_new_(value_mode ? TR_CFG_SCALAR : TR_CFG_MAP, source, value_mode ? 1 : 0,
                        value_mode ? 1 + col_off : 0);
        if (!root || !(root->path = tr_cfg_dup_("")) || (value_mode && !(root->text = tr_cfg_dup_("")))) {
            st = tr_error_set(TR_ERR_NOMEM, "%s: out of memory while parsing", source);
            goto done;
        }
    }
    *out = root;
    root = NULL;
done:
    tr_cfg_node_free_(root);
    yaml_parser_delete(&b.parser);
    return st;
}

tr_status tr_config_create(tr_config **out) {
    *out = NULL;
    tr_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) return tr_error_set(TR_ERR_NOMEM, "config: out of memory");
    cfg->root = tr_cfg_node_new_(TR_CFG_MAP, NULL, 0, 0);
    if (!cfg->root || !(cfg->root->path = tr_cfg_dup_("")) ||
        !(cfg->root->source = tr_cfg_intern_(cfg, TR_CFG_CMDLINE))) {
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
    const char *src = cfg ? tr_cfg_intern_(cfg, source_name ? source_name : "<config>") : NULL;
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
    tr_status st = tr_cfg_build_(text ? text : "", len, src, 0, 0, &cfg->root);
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
    tr_cfg_node_free_(cfg->root);
    for (struct source *s = cfg->sources, *nx; s; s = nx) {
        nx = s->next;
        free(s);
    }
    free(cfg);
}
