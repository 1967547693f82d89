/* Reading tokenizer.json: each component the file declares becomes its C counterpart, or the
 * load fails naming the file, the JSON path and what this build supports (docs/tokenizers.md).
 * Messages are "FILE: JSON.PATH: what is wrong". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

#define NORMALIZERS "BertNormalizer, NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Replace, Prepend, Precompiled, Sequence"
#define PRETOKENIZERS "BertPreTokenizer, Whitespace, WhitespaceSplit, Punctuation, Digits, ByteLevel, Split, Metaspace, Sequence"
#define POSTPROCESSORS "BertProcessing, TemplateProcessing, RobertaProcessing, ByteLevel, Sequence"
#define MODELS "WordPiece, BPE, Unigram"

tr_status tok_bad(const char *file, const char *path, const char *what) {
    return tr_error_set(TR_ERR_PARSE, "%s: %s: %s", file, path, what);
}

tr_status tok_get_type(const char *file, const char *path, json_t *j, const char *kind, const char **type) {
    if (!json_is_object(j)) return tok_bad(file, path, "expected an object");
    json_t *t = json_object_get(j, "type");
    if (!json_is_string(t))
        return tr_error_set(TR_ERR_PARSE, "%s: %s.type: expected the %s's type name", file, path, kind);
    *type = json_string_value(t);
    return TR_OK;
}

/* Optional boolean; null or absent gives def. */
tr_status tok_get_bool(const char *file, const char *path, json_t *j, const char *key, int def, int *out) {
    json_t *v = json_object_get(j, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return TR_OK;
    }
    if (!json_is_boolean(v))
        return tr_error_set(TR_ERR_PARSE, "%s: %s.%s: expected true or false", file, path, key);
    *out = json_is_true(v);
    return TR_OK;
}

tr_status tok_get_size(const char *file, const char *path, json_t *j, const char *key, size_t def, size_t *out) {
    json_t *v = json_object_get(j, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return TR_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return tr_error_set(TR_ERR_PARSE, "%s: %s.%s: expected a non-negative integer", file, path, key);
    *out = (size_t)json_integer_value(v);
    return TR_OK;
}

tr_status tok_get_id(const char *file, const char *path, json_t *v, int32_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
        return tok_bad(file, path, "expected a token id (a non-negative integer)");
    *out = (int32_t)json_integer_value(v);
    return TR_OK;
}

tr_status tok_get_cps(const char *file, const char *path, json_t *j, const char *key, uint32_t **cp, size_t *n) {
    json_t *v = json_object_get(j, key);
    if (!json_is_string(v)) return tr_error_set(TR_ERR_PARSE, "%s: %s.%s: expected a string", file, path, key);
    if (tok_utf8_to_cps(json_string_value(v), cp, n) != TR_OK)
        return tr_error_set(TR_ERR_PARSE, "%s: %s.%s: invalid UTF-8", file, path, key);
    return TR_OK;
}

char *tok_dup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* A model's "vocab" object of token: id, ids 0..N-1 each once (WordPiece, BPE). */
tr_status tok_load_vocab(const char *file, json_t *j, tok_vocab *vocab) {
    json_t *v = json_object_get(j, "vocab");
    if (!json_is_object(v)) return tok_bad(file, "model.vocab", "expected an object of token: id");
    size_t n = json_object_size(v);
    TR_CHECK(tok_vocab_init(vocab, n));
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 || (size_t)json_integer_value(val) >= n)
            return tr_error_set(TR_ERR_PARSE, "%s: model.vocab[\"%s\"]: expected an id in 0..%zu (the ids must run 0..N-1 without gaps)",
                                file, key, n ? n - 1 : 0);
        if (tok_vocab_set(vocab, (int32_t)json_integer_value(val), key, strlen(key)) != TR_OK)
            return tr_error_set(TR_ERR_PARSE, "%s: model.vocab[\"%s\"]: %s (each id once, 0..N-1)", file, key, tr_error_msg());
    }
    return TR_OK;
}

tr_status tok_load_normalizer(const char *file, const char *path, json_t *j, tok_normalizer *n) {
    memset(n, 0, sizeof *n);
    const char *type = "";
    TR_CHECK(tok_get_type(file, path, j, "normalizer", &type));
    char sub[512];
    if (strcmp(type, "BertNormalizer") == 0) {
        n->kind = TOK_NORM_BERT;
        TR_CHECK(tok_get_bool(file, path, j, "clean_text", 1, &n->clean_text));
        TR_CHECK(tok_get_bool(file, path, j, "handle_chinese_chars", 1, &n->chinese));
        TR_CHECK(tok_get_bool(file, path, j, "lowercase", 1, &n->lowercase));
        TR_CHECK(tok_get_bool(file, path, j, "strip_accents", n->lowercase, &n->strip_accents));
    } else if (strcmp(type, "NFC") == 0) n->kind = TOK_NORM_NFC;
    else if (strcmp(type, "NFD") == 0) n->kind = TOK_NORM_NFD;
    else if (strcmp(type, "NFKC") == 0) n->kind = TOK_NORM_NFKC;
    else if (strcmp(type, "NFKD") == 0) n->kind = TOK_NORM_NFKD;
    else if (strcmp(type, "Lowercase") == 0) n->kind = TOK_NORM_LOWERCASE;
    else if (strcmp(type, "StripAccents") == 0) n->kind = TOK_NORM_STRIP_ACCENTS;
    else if (strcmp(type, "Strip") == 0) {
        n->kind = TOK_NORM_STRIP;
        TR_CHECK(tok_get_bool(file, path, j, "strip_left", 1, &n->left));
        TR_CHECK(tok_get_bool(file, path, j, "strip_right", 1, &n->right));
    } else if (strcmp(type, "Replace") == 0) {
        n->kind = TOK_NORM_REPLACE;
        json_t *p = json_object_get(j, "pattern");
        snprintf(sub, sizeof sub, "%s.pattern", path);
        if (!json_is_object(p)) return tok_bad(file, sub, "expected {\"String\": ...} or {\"Regex\": ...}");
        json_t *re = json_object_get(p, "Regex");
        if (re) {
            snprintf(sub, sizeof sub, "%s.pattern.Regex", path);
            if (!json_is_string(re)) return tok_bad(file, sub, "expected a string");
            TR_CHECK(tok_regex_compile(file, sub, json_string_value(re), &n->re));
        } else {
            TR_CHECK(tok_get_cps(file, sub, p, "String", &n->pat, &n->npat));
        }
        TR_CHECK(tok_get_cps(file, path, j, "content", &n->with, &n->nwith));
    } else if (strcmp(type, "Precompiled") == 0) {
        n->kind = TOK_NORM_PRECOMPILED;
        TR_CHECK(tok_load_precompiled(file, path, j, n));
    } else if (strcmp(type, "Prepend") == 0) {
        n->kind = TOK_NORM_PREPEND;
        TR_CHECK(tok_get_cps(file, path, j, "prepend", &n->with, &n->nwith));
    } else if (strcmp(type, "Sequence") == 0) {
        n->kind = TOK_NORM_SEQUENCE;
        json_t *a = json_object_get(j, "normalizers");
        snprintf(sub, sizeof sub, "%s.normalizers", path);
        if (!json_is_array(a)) return tok_bad(file, sub, "expected a list of normalizers");
        n->kids = calloc(json_array_size(a) + 1, sizeof *n->kids);
        if (!n->kids) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
        for (size_t i = 0; i < json_array_size(a); i++) {
            snprintf(sub, sizeof sub, "%s.normalizers[%zu]", path, i);
            n->nkids = i + 1;
            TR_CHECK(tok_load_normalizer(file, sub, json_array_get(a, i), &n->kids[i]));
        }
    } else {
        return tr_error_set(TR_ERR_UNSUPPORTED, "%s: %s: normalizer '%s' is not supported (supported: %s)", file,
                            path, type, NORMALIZERS);
    }
    return TR_OK;
}

static tr_status get_behavior(const char *file, const char *path, json_t *j, tok_split_behavior *out) {
    static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    json_t *v = json_object_get(j, "behavior");
    if (!v || json_is_null(v)) {
        *out = TOK_SPLIT_ISOLATED;
        return TR_OK;
    }
    for (int i = 0; i < 5 && json_is_string(v); i++)
        if (strcmp(json_string_value(v), names[i]) == 0) {
            *out = (tok_split_behavior)i;
            return TR_OK;
        }
    return tr_error_set(TR_ERR_PARSE, "%s: %s.behavior: expected Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous",
                        file, path);
}

tr_status tok_load_pretok(const char *file, const char *path, json_t *j, tok_pretok *p) {
    memset(p, 0, sizeof *p);
    const char *type = "";
    TR_CHECK(tok_get_type(file, path, j, "pre-tokenizer", &type));
    if (strcmp(type, "BertPreTokenizer") == 0) p->kind = TOK_PRE_BERT;
    else if (strcmp(type, "Whitespace") == 0) p->kind = TOK_PRE_WHITESPACE;
    else if (strcmp(type, "WhitespaceSplit") == 0) p->kind = TOK_PRE_WHITESPACE_SPLIT;
    else if (strcmp(type, "Punctuation") == 0) {
        p->kind = TOK_PRE_PUNCTUATION;
        TR_CHECK(get_behavior(file, path, j, &p->behavior));
    } else if (strcmp(type, "Digits") == 0) {
        p->kind = TOK_PRE_DIGITS;
        TR_CHECK(tok_get_bool(file, path, j, "individual_digits", 0, &p->individual_digits));
    } else if (strcmp(type, "ByteLevel") == 0) {
        TR_CHECK(tok_load_bytelevel(file, path, j, p));
    } else if (strcmp(type, "Split") == 0) {
        TR_CHECK(get_behavior(file, path, j, &p->behavior));
        TR_CHECK(tok_load_split(file, path, j, p));
    } else if (strcmp(type, "Metaspace") == 0) {
        p->kind = TOK_PRE_METASPACE;
        TR_CHECK(tok_load_metaspace(file, path, j, &p->replacement, &p->prepend_scheme, &p->split));
    } else if (strcmp(type, "Sequence") == 0) {
        p->kind = TOK_PRE_SEQUENCE;
        char sub[512];
        json_t *a = json_object_get(j, "pretokenizers");
        snprintf(sub, sizeof sub, "%s.pretokenizers", path);
        if (!json_is_array(a)) return tok_bad(file, sub, "expected a list of pre-tokenizers");
        p->kids = calloc(json_array_size(a) + 1, sizeof *p->kids);
        if (!p->kids) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
        for (size_t i = 0; i < json_array_size(a); i++) {
            snprintf(sub, sizeof sub, "%s.pretokenizers[%zu]", path, i);
            p->nkids = i + 1;
            TR_CHECK(tok_load_pretok(file, sub, json_array_get(a, i), &p->kids[i]));
        }
    } else {
        return tr_error_set(TR_ERR_UNSUPPORTED, "%s: %s: pre-tokenizer '%s' is not supported (supported: %s)", file,
                            path, type, PRETOKENIZERS);
    }
    return TR_OK;
}

/* A [token, id] pair of BertProcessing. */
static tr_status get_pair_id(const char *file, const char *path, json_t *j, const char *key, int32_t *id) {
    char sub[512];
    snprintf(sub, sizeof sub, "%s.%s", path, key);
    json_t *v = json_object_get(j, key);
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_string(json_array_get(v, 0)))
        return tok_bad(file, sub, "expected [token, id]");
    snprintf(sub, sizeof sub, "%s.%s[1]", path, key);
    return tok_get_id(file, sub, json_array_get(v, 1), id);
}

static tr_status load_template(const char *file, const char *path, json_t *j, const char *key, json_t *specials,
                               tok_tpl_piece **out, size_t *nout) {
    char sub[512];
    json_t *a = json_object_get(j, key);
    snprintf(sub, sizeof sub, "%s.%s", path, key);
    if (!json_is_array(a)) return tok_bad(file, sub, "expected a list of template pieces");
    *out = calloc(json_array_size(a) + 1, sizeof **out);
    if (!*out) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *e = json_array_get(a, i), *v;
        tok_tpl_piece *t = &(*out)[i];
        *nout = i + 1;
        snprintf(sub, sizeof sub, "%s.%s[%zu]", path, key, i);
        if ((v = json_object_get(e, "Sequence"))) {
            json_t *id = json_object_get(v, "id");
            if (!json_is_string(id) || (strcmp(json_string_value(id), "A") && strcmp(json_string_value(id), "B")))
                return tok_bad(file, sub, "Sequence.id: expected \"A\" or \"B\"");
            t->seq = json_string_value(id)[0] == 'B';
        } else if ((v = json_object_get(e, "SpecialToken"))) {
            t->seq = -1;
            json_t *id = json_object_get(v, "id");
            if (!json_is_string(id)) return tok_bad(file, sub, "SpecialToken.id: expected the special token's name");
            json_t *s = json_object_get(specials, json_string_value(id));
            json_t *ids = json_object_get(s, "ids");
            if (!json_is_array(ids))
                return tr_error_set(TR_ERR_PARSE, "%s: %s.special_tokens: '%s' is not declared (with its ids)", file, path,
                                    json_string_value(id));
            t->ids = calloc(json_array_size(ids) + 1, sizeof *t->ids);
            if (!t->ids) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
            for (size_t k = 0; k < json_array_size(ids); k++) {
                snprintf(sub, sizeof sub, "%s.special_tokens.%s.ids[%zu]", path, json_string_value(id), k);
                TR_CHECK(tok_get_id(file, sub, json_array_get(ids, k), &t->ids[k]));
                t->nids = k + 1;
            }
        } else {
            return tok_bad(file, sub, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
        }
        json_t *ty = json_object_get(v, "type_id");
        if (ty && !json_is_null(ty)) TR_CHECK(tok_get_id(file, sub, ty, &t->type_id));
    }
    return TR_OK;
}

tr_status tok_load_post(const tr_tokenizer *tk, const char *file, const char *path, json_t *j, tok_post *p) {
    memset(p, 0, sizeof *p);
    p->tk = tk;
    const char *type = "";
    TR_CHECK(tok_get_type(file, path, j, "post-processor", &type));
    if (strcmp(type, "BertProcessing") == 0) {
        p->kind = TOK_POST_BERT;
        TR_CHECK(get_pair_id(file, path, j, "cls", &p->cls_id));
        TR_CHECK(get_pair_id(file, path, j, "sep", &p->sep_id));
    } else if (strcmp(type, "RobertaProcessing") == 0) {
        p->kind = TOK_POST_ROBERTA;
        TR_CHECK(get_pair_id(file, path, j, "cls", &p->cls_id));
        TR_CHECK(get_pair_id(file, path, j, "sep", &p->sep_id));
        TR_CHECK(tok_get_bool(file, path, j, "trim_offsets", 1, &p->trim_offsets));
        TR_CHECK(tok_get_bool(file, path, j, "add_prefix_space", 1, &p->add_prefix_space));
    } else if (strcmp(type, "ByteLevel") == 0) {
        p->kind = TOK_POST_BYTELEVEL;
        TR_CHECK(tok_get_bool(file, path, j, "trim_offsets", 1, &p->trim_offsets));
        TR_CHECK(tok_get_bool(file, path, j, "add_prefix_space", 1, &p->add_prefix_space));
    } else if (strcmp(type, "TemplateProcessing") == 0) {
        p->kind = TOK_POST_TEMPLATE;
        json_t *sp = json_object_get(j, "special_tokens");
        TR_CHECK(load_template(file, path, j, "single", sp, &p->single, &p->nsingle));
        TR_CHECK(load_template(file, path, j, "pair", sp, &p->pair, &p->npair));
    } else if (strcmp(type, "Sequence") == 0) {
        p->kind = TOK_POST_SEQUENCE;
        char sub[512];
        json_t *a = json_object_get(j, "processors");
        snprintf(sub, sizeof sub, "%s.processors", path);
        if (!json_is_array(a)) return tok_bad(file, sub, "expected a list of post-processors");
        p->kids = calloc(json_array_size(a) + 1, sizeof *p->kids);
        if (!p->kids) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
        for (size_t i = 0; i < json_array_size(a); i++) {
            snprintf(sub, sizeof sub, "%s.processors[%zu]", path, i);
            p->nkids = i + 1;
            TR_CHECK(tok_load_post(tk, file, sub, json_array_get(a, i), &p->kids[i]));
        }
    } else {
        return tr_error_set(TR_ERR_UNSUPPORTED, "%s: %s: post-processor '%s' is not supported (supported: %s)", file,
                            path, type, POSTPROCESSORS);
    }
    return TR_OK;
}

static tr_status load_model(const char *file, json_t *j, tok_model *m) {
    m->unk_id = -1;
    if (!json_is_object(j)) return tok_bad(file, "model", "expected an object");
    json_t *t = json_object_get(j, "type");
    if (t && !json_is_string(t)) return tok_bad(file, "model.type", "expected the model's type name");
    const char *type = t ? json_string_value(t) : NULL;
    /* Files from old converters name no type: the fields tell, BPE first (the Rust order). */
    if (!type && json_object_get(j, "merges"))
        type = "BPE";
    if (!type && json_object_get(j, "continuing_subword_prefix"))
        type = "WordPiece";
    else if (!type && json_is_array(json_object_get(j, "vocab")))
        type = "Unigram"; /* a list of [piece, score] */
    if (!type) return tok_bad(file, "model", "the model names no type (supported: " MODELS ")");
    if (strcmp(type, "WordPiece") == 0) return tok_load_wordpiece(file, j, m);
    if (strcmp(type, "BPE") == 0) return tok_load_bpe(file, j, m);
    if (strcmp(type, "Unigram") == 0) return tok_load_unigram(file, j, m);
    return tr_error_set(TR_ERR_UNSUPPORTED, "%s: model: model '%s' is not supported (supported: %s)", file, type,
                        MODELS);
}

static tr_status load_added(tr_tokenizer *t, const char *file, json_t *a) {
    if (!a || json_is_null(a)) return TR_OK;
    if (!json_is_array(a)) return tok_bad(file, "added_tokens", "expected a list");
    t->added = calloc(json_array_size(a) + 1, sizeof *t->added);
    if (!t->added) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    char sub[128];
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *e = json_array_get(a, i);
        tok_added *x = &t->added[i];
        t->nadded = i + 1;
        snprintf(sub, sizeof sub, "added_tokens[%zu]", i);
        if (!json_is_object(e)) return tok_bad(file, sub, "expected an object");
        char idp[160];
        snprintf(idp, sizeof idp, "%s.id", sub);
        TR_CHECK(tok_get_id(file, idp, json_object_get(e, "id"), &x->id));
        TR_CHECK(tok_get_cps(file, sub, e, "content", &x->cp, &x->ncp));
        if (x->ncp == 0) return tok_bad(file, sub, "content: an added token cannot be empty");
        x->content = tok_dup(json_string_value(json_object_get(e, "content")));
        if (!x->content) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
        TR_CHECK(tok_get_bool(file, sub, e, "special", 0, &x->special));
        TR_CHECK(tok_get_bool(file, sub, e, "normalized", !x->special, &x->normalized));
        TR_CHECK(tok_get_bool(file, sub, e, "lstrip", 0, &x->lstrip));
        TR_CHECK(tok_get_bool(file, sub, e, "rstrip", 0, &x->rstrip));
        TR_CHECK(tok_get_bool(file, sub, e, "single_word", 0, &x->single_word));
        int32_t vid = tok_vocab_find(&t->model.vocab, x->content, strlen(x->content));
        if (vid >= 0 && vid != x->id)
            return tr_error_set(TR_ERR_PARSE, "%s: %s: '%s' has id %d here but %d in model.vocab", file, sub, x->content,
                                x->id, vid);
        for (size_t k = 0; k < i; k++)
            if (t->added[k].id == x->id && strcmp(t->added[k].content, x->content) != 0)
                return tr_error_set(TR_ERR_PARSE, "%s: %s: id %d is given to '%s' too", file, sub, x->id, t->added[k].content);
    }
    return TR_OK;
}

static tr_status get_side(const char *file, const char *path, json_t *j, tr_side *out) {
    json_t *d = json_object_get(j, "direction");
    *out = TR_SIDE_RIGHT;
    if (!d || json_is_null(d)) return TR_OK;
    if (json_is_string(d) && strcmp(json_string_value(d), "Right") == 0) return TR_OK;
    if (json_is_string(d) && strcmp(json_string_value(d), "Left") == 0) {
        *out = TR_SIDE_LEFT;
        return TR_OK;
    }
    return tr_error_set(TR_ERR_PARSE, "%s: %s.direction: expected \"Right\" or \"Left\"", file, path);
}

static tr_status load_truncation(tr_tokenizer *t, const char *file, json_t *j) {
    if (!j || json_is_null(j)) return TR_OK;
    if (!json_is_object(j)) return tok_bad(file, "truncation", "expected an object or null");
    t->trunc.enabled = 1;
    TR_CHECK(tok_get_size(file, "truncation", j, "max_length", 512, &t->trunc.max_length));
    TR_CHECK(tok_get_size(file, "truncation", j, "stride", 0, &t->trunc.stride));
    if (t->trunc.stride)
        return tr_error_set(TR_ERR_UNSUPPORTED, "%s: truncation.stride: %zu is not supported (only 0)", file, t->trunc.stride);
    TR_CHECK(get_side(file, "truncation", j, &t->trunc.direction));
    json_t *s = json_object_get(j, "strategy");
    const char *name = json_is_string(s) ? json_string_value(s) : "";
    if (!s || json_is_null(s) || strcmp(name, "LongestFirst") == 0) t->trunc.strategy = TR_TRUNCATE_LONGEST_FIRST;
    else if (strcmp(name, "OnlyFirst") == 0) t->trunc.strategy = TR_TRUNCATE_ONLY_FIRST;
    else if (strcmp(name, "OnlySecond") == 0) t->trunc.strategy = TR_TRUNCATE_ONLY_SECOND;
    else return tok_bad(file, "truncation.strategy", "expected LongestFirst, OnlyFirst or OnlySecond");
    return TR_OK;
}

static tr_status load_padding(tr_tokenizer *t, const char *file, json_t *j) {
    if (!j || json_is_null(j)) return TR_OK;
    if (!json_is_object(j)) return tok_bad(file, "padding", "expected an object or null");
    json_t *s = json_object_get(j, "strategy");
    if (json_is_string(s) && strcmp(json_string_value(s), "BatchLongest") == 0) t->pad.strategy = TR_PAD_LONGEST;
    else if (json_is_object(s) && json_object_get(s, "Fixed")) {
        t->pad.strategy = TR_PAD_FIXED;
        TR_CHECK(tok_get_size(file, "padding.strategy", s, "Fixed", 0, &t->pad.length));
    } else return tok_bad(file, "padding.strategy", "expected \"BatchLongest\" or {\"Fixed\": N}");
    TR_CHECK(get_side(file, "padding", j, &t->pad.direction));
    TR_CHECK(tok_get_size(file, "padding", j, "pad_to_multiple_of", 0, &t->pad.multiple_of));
    if (t->pad.length > TOK_MAX_PAD || t->pad.multiple_of > TOK_MAX_PAD)
        return tr_error_set(TR_ERR_PARSE, "%s: padding: %zu tokens is more than the %zu this build pads to", file,
                            t->pad.length > TOK_MAX_PAD ? t->pad.length : t->pad.multiple_of, TOK_MAX_PAD);
    size_t v = 0;
    TR_CHECK(tok_get_size(file, "padding", j, "pad_id", 0, &v));
    if (v > INT32_MAX) return tok_bad(file, "padding.pad_id", "out of range");
    t->pad.pad_id = (int32_t)v;
    TR_CHECK(tok_get_size(file, "padding", j, "pad_type_id", 0, &v));
    if (v > INT32_MAX) return tok_bad(file, "padding.pad_type_id", "out of range");
    t->pad.pad_type_id = (int32_t)v;
    json_t *tok = json_object_get(j, "pad_token");
    if (tok && !json_is_string(tok)) return tok_bad(file, "padding.pad_token", "expected a string");
    t->pad_token = tok_dup(tok ? json_string_value(tok) : "[PAD]");
    if (!t->pad_token) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
    t->pad.pad_token = t->pad_token;
    return TR_OK;
}

/* Fills t (zeroed by the caller) from the parsed file; the caller frees t on failure. */
tr_status tok_load_root(tr_tokenizer *t, const char *file, json_t *root) {
    if (!json_is_object(root)) return tr_error_set(TR_ERR_PARSE, "%s: expected a JSON object at the top", file);
    json_t *model = json_object_get(root, "model");
    if (!model) return tok_bad(file, "model", "missing (a tokenizer.json has a model)");
    TR_CHECK(load_model(file, model, &t->model));
    TR_CHECK(load_added(t, file, json_object_get(root, "added_tokens")));
    json_t *j = json_object_get(root, "normalizer");
    if (j && !json_is_null(j)) {
        t->normalizer = calloc(1, sizeof *t->normalizer);
        if (!t->normalizer) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
        TR_CHECK(tok_load_normalizer(file, "normalizer", j, t->normalizer));
    }
    j = json_object_get(root, "pre_tokenizer");
    if (j && !json_is_null(j)) {
        t->pretok = calloc(1, sizeof *t->pretok);
        if (!t->pretok) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
        TR_CHECK(tok_load_pretok(file, "pre_tokenizer", j, t->pretok));
    }
    j = json_object_get(root, "post_processor");
    if (j && !json_is_null(j)) {
        t->post = calloc(1, sizeof *t->post);
        if (!t->post) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
        TR_CHECK(tok_load_post(t, file, "post_processor", j, t->post));
    }
    j = json_object_get(root, "decoder");
    if (j && !json_is_null(j)) {
        t->decoder = calloc(1, sizeof *t->decoder);
        if (!t->decoder) return tr_error_set(TR_ERR_NOMEM, "tokenizer: out of memory");
        TR_CHECK(tok_load_decoder(file, "decoder", j, t->decoder));
    }
    TR_CHECK(load_truncation(t, file, json_object_get(root, "truncation")));
    TR_CHECK(load_padding(t, file, json_object_get(root, "padding")));
    return TR_OK;
}
