/* Writes the config tree back as block-style YAML: keys in document order, two-space indent,
 * empty collections as {} and [], scalars plain when that reads back the same and
 * double-quoted (with escapes) otherwise. The output re-parses to the same tree. Comments and
 * the source's layout are not kept: this is the resolved config, not an edit of the file. */
#include <errno.h>
#include <string.h>

#include "config/node.h"

/* Characters a scalar may hold that do not read back as written: C1 controls (libyaml's
 * reader refuses them, except NEL), NEL, LS and PS (line breaks, folded inside a scalar),
 * BOM (skipped at a line start) and the non-characters U+FFFE, U+FFFF (refused). Returns the
 * UTF-8 length of the one `s` starts with, else 0; *cp receives its code point. */
static size_t awkward_char(const unsigned char *s, unsigned *cp) {
    if (s[0] == 0xc2 && s[1] >= 0x80 && s[1] <= 0x9f) {
        *cp = s[1];
        return 2;
    }
    if ((s[0] == 0xe2 && s[1] == 0x80 && (s[2] == 0xa8 || s[2] == 0xa9)) ||
        (s[0] == 0xef && s[1] == 0xbb && s[2] == 0xbf) ||
        (s[0] == 0xef && s[1] == 0xbf && (s[2] == 0xbe || s[2] == 0xbf))) {
        *cp = (unsigned)(s[0] & 0x0f) << 12 | (unsigned)(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
        return 3;
    }
    return 0;
}

/* Whether `s` reads back as the same plain scalar in a block context. */
static int plain_ok(const char *s, int is_key) {
    size_t n = strlen(s);
    if (n == 0) return !is_key; /* `key:` with nothing reads back as an empty plain value */
    if (strchr("?:-", s[0]) && (n == 1 || s[1] == ' ')) return 0;
    if (strchr(",[]{}#&*!|>'\"%@` ", s[0])) return 0;
    if (strncmp(s, "---", 3) == 0 || strncmp(s, "...", 3) == 0) return 0;
    if (s[n - 1] == ' ' || s[n - 1] == ':') return 0;
    if (strstr(s, ": ") || strstr(s, " #")) return 0;
    unsigned cp;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f || awkward_char(p, &cp)) return 0;
    return 1;
}

static void put_quoted(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned cp;
        size_t n = awkward_char(p, &cp);
        if (n) {
            fprintf(f, cp < 0x100 ? "\\x%02x" : "\\u%04x", cp);
            p += n - 1;
            continue;
        }
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fprintf(f, "\\x%02x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

static void put_text(FILE *f, const char *s, int quoted, int is_key) {
    if (!quoted && plain_ok(s, is_key))
        fputs(s, f);
    else
        put_quoted(f, s);
}

static void indent(FILE *f, int n) {
    for (int i = 0; i < n; i++) fputc(' ', f);
}

static void put_seq(FILE *f, const tr_cfg_node *seq, int ind, int inline_first);

/* After "key:" or "- ": a scalar or empty collection on the same line, else a new block. */
static void put_value(FILE *f, const tr_cfg_node *v, int ind);

/* YAML reads a key written as `key:` only within 1024 characters; a longer one (escapes grow
 * a byte to 4 characters at most) is written as an explicit key: `? "key"` then `: value`. */
#define SIMPLE_KEY_MAX 128

static void put_map(FILE *f, const tr_cfg_node *map, int ind, int inline_first) {
    for (size_t i = 0; i < map->n; i++) {
        const char *key = map->kids[i]->key;
        if (i > 0 || !inline_first) indent(f, ind);
        if (strlen(key) > SIMPLE_KEY_MAX) {
            fputs("? ", f);
            put_quoted(f, key);
            fputc('\n', f);
            indent(f, ind);
        } else {
            put_text(f, key, 0, 1);
        }
        fputc(':', f);
        put_value(f, map->kids[i], ind + 2);
    }
}

static void put_seq(FILE *f, const tr_cfg_node *seq, int ind, int inline_first) {
    for (size_t i = 0; i < seq->n; i++) {
        const tr_cfg_node *v = seq->kids[i];
        if (i > 0 || !inline_first) indent(f, ind);
        fputc('-', f);
        if (v->kind != TR_CFG_SCALAR && v->n > 0) {
            fputc(' ', f);
            if (v->kind == TR_CFG_MAP)
                put_map(f, v, ind + 2, 1);
            else
                put_seq(f, v, ind + 2, 1);
        } else {
            put_value(f, v, ind + 2);
        }
    }
}

static void put_value(FILE *f, const tr_cfg_node *v, int ind) {
    if (v->kind == TR_CFG_SCALAR) {
        if (v->text[0] || v->quoted) fputc(' ', f);
        put_text(f, v->text, v->quoted, 0);
        fputc('\n', f);
    } else if (v->n == 0) {
        fputs(v->kind == TR_CFG_MAP ? " {}\n" : " []\n", f);
    } else {
        fputc('\n', f);
        if (v->kind == TR_CFG_MAP)
            put_map(f, v, ind, 0);
        else
            put_seq(f, v, ind, 0);
    }
}

tr_status tr_config_write(const tr_config *cfg, FILE *f) {
    const tr_cfg_node *root = tr_config_root(cfg);
    if (!root || !f) return tr_error_set(TR_ERR_INVALID, "config write: NULL config or stream");
    if (root->n == 0)
        fputs("{}\n", f);
    else
        put_map(f, root, 0, 0);
    if (ferror(f)) return tr_error_set(TR_ERR_IO, "config write: %s", strerror(errno));
    return TR_OK;
}

tr_status tr_config_save(const tr_config *cfg, const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) return tr_error_set(TR_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    tr_status st = tr_config_write(cfg, f);
    if (fclose(f) != 0 && st == TR_OK)
        st = tr_error_set(TR_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    if (st) tr_error_prefix("%s: ", path);
    return st;
}
