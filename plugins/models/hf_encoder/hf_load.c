/* hf_encoder's loader: config.json (the architecture, refused by name where this plugin cannot
 * honour it), sentence-transformers' modules.json / 1_Pooling/config.json (pooling defaults),
 * the safetensors weights (one file or an index of shards) checked against the model before
 * anything is registered, and the ranged fill that copies any piece of them into the flat
 * parameter buffer (F32, F16, BF16 upcast to f32; a sharded rank reads its pieces only);
 * config.json's text as the checkpoints keep it.
 * The name rules are in docs/huggingface.md. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hf_encoder.h"
#include "trainer/half.h"
#include "trainer/io.h"
#include "trainer/log.h"
#include "trainer/tokenizer.h"

int hf_file_exists(const char *dir, const char *name) {
    char p[4200];
    struct stat sb;
    if (snprintf(p, sizeof p, "%s/%s", dir, name) >= (int)sizeof p) return 0;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static tr_status json_read(const char *dir, const char *name, json_t **out) {
    char p[4200];
    json_error_t err;
    if (snprintf(p, sizeof p, "%s/%s", dir, name) >= (int)sizeof p)
        return tr_error_set(TR_ERR_INVALID, "hf_encoder: %s/%s: path too long", dir, name);
    *out = json_load_file(p, 0, &err);
    if (!*out) return tr_error_set(TR_ERR_INVALID, "hf_encoder: %s:%d: %s", p, err.line, err.text);
    return TR_OK;
}

/* An integer field of config.json: required unless def >= 0 (then its default). */
static tr_status cfg_int(const hf_model *m, json_t *c, const char *key, int64_t def, int64_t *out) {
    json_t *v = json_object_get(c, key);
    if (!v || json_is_null(v)) {
        if (def < 0) return tr_error_set(TR_ERR_INVALID, "hf_encoder: %s/config.json has no %s", m->dir, key);
        *out = def;
        return TR_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 1)
        return tr_error_set(TR_ERR_INVALID, "hf_encoder: %s/config.json: %s must be a positive integer", m->dir, key);
    *out = json_integer_value(v);
    return TR_OK;
}

static double cfg_num(json_t *c, const char *key, double def) {
    json_t *v = json_object_get(c, key);
    return v && json_is_number(v) ? json_number_value(v) : def;
}

/* A dropout probability of config.json: def when absent or null, else a number in [0, 1). */
static tr_status cfg_prob(const hf_model *m, json_t *c, const char *key, double def, double *out) {
    json_t *v = json_object_get(c, key);
    *out = def;
    if (!v || json_is_null(v)) return TR_OK;
    if (!json_is_number(v))
        return tr_error_set(TR_ERR_INVALID, "hf_encoder: %s/config.json: %s must be a number in [0, 1) (a dropout "
                                            "probability), got a %s", m->dir, key,
                            json_is_string(v) ? "string" : json_is_boolean(v) ? "boolean" : "list or object");
    *out = json_number_value(v);
    if (!(*out >= 0 && *out < 1))
        return tr_error_set(TR_ERR_INVALID, "hf_encoder: %s/config.json: %s %g is outside [0, 1) (a dropout "
                                            "probability)", m->dir, key, *out);
    return TR_OK;
}

static tr_status read_arch(hf_model *m, json_t *c) {
    json_t *mt = json_object_get(c, "model_type");
    const char *type = json_is_string(mt) ? json_string_value(mt) : "";
    m->roberta = strcmp(type, "roberta") == 0 || strcmp(type, "xlm-roberta") == 0;
    if (strcmp(type, "bert") != 0 && !m->roberta)
        return tr_error_set(TR_ERR_INVALID, "hf_encoder: %s/config.json: model_type '%s' is not a BERT-family "
                                            "encoder this plugin builds (bert, roberta, xlm-roberta)",
                            m->dir, *type ? type : "(none)");
    static const char *const refuse_true[] = {"is_decoder", "add_cross_attention"};
    for (int i = 0; i < 2; i++)
        if (json_is_true(json_object_get(c, refuse_true[i])))
            return tr_error_set(TR_ERR_INVALID, "hf_encoder: %s/config.json: %s is true: only encoders load "
                                                "(no decoder, no cross-attention)", m->dir, refuse_true[i]);
    json_t *pe = json_object_get(c, "position_embedding_type");
    if (pe && !json_is_null(pe) && (!json_is_string(pe) || strcmp(json_string_value(pe), "absolute") != 0))
        return tr_error_set(TR_ERR_INVALID, "hf_encoder: %s/config.json: position_embedding_type '%s' is not "
                                            "supported (absolute only)", m->dir,
                            json_is_string(pe) ? json_string_value(pe) : "?");
    int64_t L = 0, NH = 1;
    TR_CHECK(cfg_int(m, c, "vocab_size", -1, &m->V));
    TR_CHECK(cfg_int(m, c, "hidden_size", -1, &m->H));
    TR_CHECK(cfg_int(m, c, "num_hidden_layers", -1, &L));
    TR_CHECK(cfg_int(m, c, "num_attention_heads", -1, &NH));
    TR_CHECK(cfg_int(m, c, "intermediate_size", -1, &m->F));
    TR_CHECK(cfg_int(m, c, "max_position_embeddings", 512, &m->S));
    json_t *pad = json_object_get(c, "pad_token_id");
    m->pad_id = json_is_integer(pad) ? (int32_t)json_integer_value(pad) : m->roberta ? 1 : 0;
    if (m->roberta && (m->pad_id < 0 || m->pad_id + 1 >= m->S))
        return tr_error_set(TR_ERR_INVALID, "hf_encoder: %s/config.json: pad_token_id %d leaves no position of "
                                            "max_position_embeddings %lld (RoBERTa's positions start at pad_token_id + 1)",
                            m->dir, (int)m->pad_id, (long long)m->S);
    TR_CHECK(cfg_int(m, c, "type_vocab_size", 2, &m->type_vocab));
    if (L > 4096 || NH > 4096 || m->H % NH != 0)
        return tr_error_set(TR_ERR_INVALID, "hf_encoder: %s/config.json: hidden_size %lld is not a multiple of "
                                            "num_attention_heads %lld (or a count is out of range)",
                            m->dir, (long long)m->H, (long long)NH);
    m->n_layer = (int)L;
    m->n_head = (int)NH;
    m->eps = cfg_num(c, "layer_norm_eps", 1e-12);
    TR_CHECK(cfg_prob(m, c, "hidden_dropout_prob", 0.1, &m->hidden_dropout));
    TR_CHECK(cfg_prob(m, c, "attention_probs_dropout_prob", 0.1, &m->attn_dropout));
    TR_CHECK(cfg_prob(m, c, "classifier_dropout", m->hidden_dropout, &m->classifier_dropout));
    m->init_range = cfg_num(c, "initializer_range", 0.02);
    json_t *act = json_object_get(c, "hidden_act");
    const char *a = json_is_string(act) ? json_string_value(act) : "gelu";
    if (strcmp(a, "gelu") == 0) m->act = HF_ACT_GELU;
    else if (strcmp(a, "gelu_new") == 0 || strcmp(a, "gelu_pytorch_tanh") == 0) m->act = HF_ACT_GELU_TANH;
    else if (strcmp(a, "relu") == 0) m->act = HF_ACT_RELU;
    else
        return tr_error_set(TR_ERR_INVALID, "hf_encoder: %s/config.json: hidden_act '%s' is not supported (gelu, "
                                            "gelu_new, gelu_pytorch_tanh, relu)", m->dir, a);
    if (m->sep_id == -2) {
        json_t *sep = json_object_get(c, "sep_token_id");
        if (json_is_integer(sep)) m->sep_id = (int32_t)json_integer_value(sep);
    }
    return TR_OK;
}

static const char *const pooling_names[] = {"cls", "mean", "pooler"};

/* The choices a run kept in its checkpoint's config.json: pooling, normalize, whether the
 * pooler is a parameter; -1 each when the file has none (a pretrained folder's). */
static tr_status kept_read(hf_model *m, json_t *c, const char *path) {
    m->kept_pooling = m->kept_normalize = m->kept_pooler = -1;
    json_t *k = json_object_get(c, HF_KEPT_KEY);
    m->config_has_kept = k != NULL;
    if (!k) return TR_OK;
    const char *pool = json_string_value(json_object_get(k, "pooling"));
    json_t *norm = json_object_get(k, "normalize"), *pooler = json_object_get(k, "pooler");
    for (int i = 0; pool && i < 3; i++)
        if (strcmp(pool, pooling_names[i]) == 0) m->kept_pooling = i;
    if (m->kept_pooling < 0 || !json_is_boolean(norm) || !json_is_boolean(pooler))
        return tr_error_set(TR_ERR_INVALID, "hf_encoder: %s: %s must be {\"pooling\": cls, mean or pooler, "
                                            "\"normalize\": true or false, \"pooler\": true or false}", path, HF_KEPT_KEY);
    m->kept_normalize = json_is_true(norm);
    m->kept_pooler = json_is_true(pooler);
    return TR_OK;
}

tr_status hf_config_read(hf_model *m, const char *dir) {
    if (!dir || !*dir)
        return tr_error_set(TR_ERR_INVALID, "hf_encoder: model.params.pretrained is required: a Hugging Face model "
                                            "folder with config.json and model.safetensors");
    if (snprintf(m->dir, sizeof m->dir, "%s", dir) >= (int)sizeof m->dir)
        return tr_error_set(TR_ERR_INVALID, "hf_encoder: pretrained: path too long");
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return tr_error_set(TR_ERR_INVALID, "hf_encoder: pretrained: %s is not a folder", dir);
    if (!hf_file_exists(dir, "config.json"))
        return tr_error_set(TR_ERR_INVALID, "hf_encoder: pretrained: %s has no config.json", dir);
    char p[4200];
    json_error_t err;
    snprintf(p, sizeof p, "%s/config.json", dir);
    TR_CHECK(tr_file_read(p, &m->config_text, &m->config_len)); /* kept: hf_config_keep */
    json_t *c = json_loadb(m->config_text, m->config_len, 0, &err);
    if (!c) return tr_error_set(TR_ERR_INVALID, "hf_encoder: %s:%d: %s", p, err.line, err.text);
    m->config_has_sep = json_object_get(c, "sep_token_id") != NULL;
    tr_status st = json_is_object(c) ? read_arch(m, c)
                                     : tr_error_set(TR_ERR_INVALID, "hf_encoder: %s/config.json is not an object", dir);
    if (st == TR_OK) st = kept_read(m, c, p);
    json_decref(c);
    if (st != TR_OK) return st;
    if (m->sep_id == -2) { /* the folder's tokenizer's [SEP] */
        m->sep_id = -1;
        tr_tokenizer *tok = NULL;
        if (hf_file_exists(dir, "tokenizer.json") && tr_tokenizer_load(&tok, dir) == TR_OK) {
            int32_t id;
            if (tr_tokenizer_token_to_id(tok, "[SEP]", &id) == TR_OK) m->sep_id = id;
            m->sep_from_tokenizer = m->sep_id >= 0;
            tr_tokenizer_free(tok);
        }
        tr_error_clear();
    }
    m->layer = calloc((size_t)m->n_layer, sizeof *m->layer);
    if (!m->layer) return tr_error_set(TR_ERR_NOMEM, "hf_encoder: out of memory");
    const char *dump = getenv("TR_HF_ENCODER_DUMP");
    m->dump_dir = dump && *dump ? dump : NULL;
    return TR_OK;
}

tr_status hf_config_keep(const hf_model *m, tr_params *P) {
    if (m->from_checkpoint) return tr_params_add_file(P, "config.json", m->config_text, m->config_len);
    /* What the files decided at the start, which a resume must not decide again from files it
     * no longer reads: the sep id the tokenizer gave, the pooling modules.json chose, and
     * whether the pooler is a parameter (it is when the folder has one). */
    char ins[256];
    int k = snprintf(ins, sizeof ins, "\n  \"" HF_KEPT_KEY "\": {\"pooling\": \"%s\", \"normalize\": %s, \"pooler\": %s},",
                     pooling_names[m->pooling], m->normalize ? "true" : "false", m->pool_w >= 0 ? "true" : "false");
    if (m->sep_from_tokenizer) k += snprintf(ins + k, sizeof ins - (size_t)k, "\n  \"sep_token_id\": %d,", (int)m->sep_id);
    const char *brace = strchr(m->config_text, '{'); /* it parsed as a non-empty object */
    char *text = NULL;
    size_t n = 0;
    if (!brace || m->config_has_kept || (m->sep_from_tokenizer && m->config_has_sep)) {
        /* keys there already (a checkpoint given as the pretrained folder; "sep_token_id": null):
         * the JSON written anew */
        json_t *c = json_loadb(m->config_text, m->config_len, 0, NULL);
        json_t *kept = json_pack("{s:s, s:b, s:b}", "pooling", pooling_names[m->pooling], "normalize", m->normalize,
                                 "pooler", m->pool_w >= 0);
        int ok = 0;
        if (c && kept) { /* set_new takes the reference, whatever it returns */
            ok = json_object_set_new(c, HF_KEPT_KEY, kept) == 0 &&
                 (!m->sep_from_tokenizer || json_object_set_new(c, "sep_token_id", json_integer(m->sep_id)) == 0);
            kept = NULL;
        }
        json_decref(kept);
        text = ok ? json_dumps(c, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        json_decref(c);
        n = text ? strlen(text) : 0;
    } else {
        size_t head = (size_t)(brace + 1 - m->config_text);
        n = m->config_len + (size_t)k;
        if ((text = malloc(n))) {
            memcpy(text, m->config_text, head);
            memcpy(text + head, ins, (size_t)k);
            memcpy(text + head + k, m->config_text + head, m->config_len - head);
        }
    }
    if (!text) return tr_error_set(TR_ERR_NOMEM, "hf_encoder: out of memory");
    tr_status st = tr_params_add_file(P, "config.json", text, n);
    free(text);
    return st;
}

tr_status hf_pooling_read(hf_model *m, const char *pooling, const char *normalize) {
    int pool = HF_POOL_CLS, norm = 0;
    if (hf_file_exists(m->dir, "modules.json")) {
        json_t *mods;
        TR_CHECK(json_read(m->dir, "modules.json", &mods));
        size_t i;
        json_t *mod;
        tr_status st = TR_OK;
        json_array_foreach(mods, i, mod) {
            const char *type = json_string_value(json_object_get(mod, "type"));
            const char *path = json_string_value(json_object_get(mod, "path"));
            if (!type) continue;
            if (strstr(type, "Normalize")) norm = 1;
            if (!strstr(type, "Pooling") || !path) continue;
            char sub[4200];
            snprintf(sub, sizeof sub, "%s/config.json", path);
            if (!hf_file_exists(m->dir, sub)) continue;
            json_t *pc;
            st = json_read(m->dir, sub, &pc);
            if (st != TR_OK) break;
            if (json_is_true(json_object_get(pc, "pooling_mode_mean_tokens"))) pool = HF_POOL_MEAN;
            else if (json_is_true(json_object_get(pc, "pooling_mode_cls_token"))) pool = HF_POOL_CLS;
            else if (!pooling || strcmp(pooling, "auto") == 0)
                st = tr_error_set(TR_ERR_INVALID, "hf_encoder: %s/%s asks for a pooling this plugin lacks (max or "
                                                  "mean_sqrt_len): set model.params.pooling to cls, mean or pooler",
                                  m->dir, sub);
            json_decref(pc);
            if (st != TR_OK) break;
        }
        json_decref(mods);
        if (st != TR_OK) return st;
    }
    if (pooling && strcmp(pooling, "cls") == 0) pool = HF_POOL_CLS;
    else if (pooling && strcmp(pooling, "mean") == 0) pool = HF_POOL_MEAN;
    else if (pooling && strcmp(pooling, "pooler") == 0) pool = HF_POOL_POOLER;
    if (normalize && strcmp(normalize, "true") == 0) norm = 1;
    else if (normalize && strcmp(normalize, "false") == 0) norm = 0;
    m->pooling = pool;
    m->normalize = norm;
    return TR_OK;
}

/* ---- weights ---- */

static tr_status open_shard(hf_model *m, const char *name) {
    if (strchr(name, '/') || strcmp(name, "..") == 0)
        return tr_error_set(TR_ERR_INVALID, "hf_encoder: %s/model.safetensors.index.json names shard '%s' outside "
                                            "the folder", m->dir, name);
    if (m->n_files == HF_MAX_SHARDS)
        return tr_error_set(TR_ERR_INVALID, "hf_encoder: %s: more than %d shards", m->dir, HF_MAX_SHARDS);
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", m->dir, name);
    TR_CHECK(tr_safetensors_open(&m->files[m->n_files], p));
    m->n_files++;
    return TR_OK;
}

tr_status hf_files_open(hf_model *m) {
    if (hf_file_exists(m->dir, "model.safetensors")) return open_shard(m, "model.safetensors");
    if (hf_file_exists(m->dir, "model.safetensors.index.json")) {
        json_t *ix;
        TR_CHECK(json_read(m->dir, "model.safetensors.index.json", &ix));
        json_t *map = json_object_get(ix, "weight_map");
        tr_status st = json_is_object(map) ? TR_OK
                                           : tr_error_set(TR_ERR_INVALID, "hf_encoder: %s/model.safetensors.index.json "
                                                                          "has no weight_map", m->dir);
        /* The distinct shard names, in the order first named. */
        const char *names[HF_MAX_SHARDS];
        int n = 0;
        const char *key;
        json_t *v;
        json_object_foreach(map, key, v) {
            if (st != TR_OK) break;
            const char *f = json_string_value(v);
            if (!f) {
                st = tr_error_set(TR_ERR_INVALID, "hf_encoder: %s/model.safetensors.index.json: %s names no file",
                                  m->dir, key);
                break;
            }
            int seen = 0;
            for (int i = 0; i < n && !seen; i++) seen = strcmp(names[i], f) == 0;
            if (seen) continue;
            if (n == HF_MAX_SHARDS) {
                st = tr_error_set(TR_ERR_INVALID, "hf_encoder: %s: more than %d shards", m->dir, HF_MAX_SHARDS);
                break;
            }
            names[n++] = f;
        }
        for (int i = 0; i < n && st == TR_OK; i++) st = open_shard(m, names[i]);
        json_decref(ix);
        return st;
    }
    if (hf_file_exists(m->dir, "pytorch_model.bin"))
        return tr_error_set(TR_ERR_INVALID,
                            "hf_encoder: %s holds pytorch_model.bin only: convert it to safetensors first with\n"
                            "  python3 -c \"import torch; from safetensors.torch import save_file; "
                            "sd = torch.load('%s/pytorch_model.bin', map_location='cpu'); "
                            "save_file({k: v.contiguous().clone() for k, v in sd.items()}, '%s/model.safetensors')\"",
                            m->dir, m->dir, m->dir);
    return tr_error_set(TR_ERR_INVALID, "hf_encoder: %s has no model.safetensors (nor model.safetensors.index.json)",
                        m->dir);
}

void hf_files_close(hf_model *m) {
    for (int i = 0; i < m->n_files; i++) tr_safetensors_close(m->files[i]);
    m->n_files = 0;
}

/* The name a file's tensor has in this model ("" for one ignored), into out. */
static void canonical(const char *raw, char *out, size_t size) {
    const char *n = strncmp(raw, "bert.", 5) == 0 ? raw + 5 : strncmp(raw, "roberta.", 8) == 0 ? raw + 8 : raw;
    size_t len = strlen(n);
    if (strncmp(n, "cls.", 4) == 0 || strncmp(n, "lm_head.", 8) == 0 ||
        (len >= 12 && strcmp(n + len - 12, "position_ids") == 0)) {
        out[0] = 0;
        return;
    }
    snprintf(out, size, "%s", n);
    if (!strstr(out, "LayerNorm.")) return;
    len = strlen(out);
    if (len >= 6 && strcmp(out + len - 6, ".gamma") == 0) snprintf(out + len - 6, size - (len - 6), ".weight");
    else if (len >= 5 && strcmp(out + len - 5, ".beta") == 0) snprintf(out + len - 5, size - (len - 5), ".bias");
}

static void shape_str(char *out, size_t size, int ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(out, size, "[");
    for (int d = 0; d < ndim && k < size; d++)
        k += (size_t)snprintf(out + k, size - k, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (k < size) snprintf(out + k, size - k, "]");
}

/* The model's tensors, in registration order. */
typedef struct want {
    char name[128];
    int ndim;
    int64_t shape[2];
    tr_init init;     /* when absent from the files and optional */
    double arg;
    int optional;     /* absent: initialised (the pooler, the classifier) */
    int *index;
    const tr_st_entry *e;
    const tr_safetensors *f; /* e's shard */
    const char *file;
} want;

typedef struct plan {
    want *w;
    int n, cap;
} plan;

static tr_status want_add(plan *p, int *index, int ndim, int64_t d0, int64_t d1, tr_init init, double arg,
                          int optional, const char *fmt, int layer) {
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 64;
        want *w = realloc(p->w, (size_t)cap * sizeof *w);
        if (!w) return tr_error_set(TR_ERR_NOMEM, "hf_encoder: out of memory");
        p->w = w;
        p->cap = cap;
    }
    want *w = &p->w[p->n++];
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, fmt, layer);
    w->ndim = ndim;
    w->shape[0] = d0;
    w->shape[1] = d1;
    w->init = init;
    w->arg = arg;
    w->optional = optional;
    w->index = index;
    *index = -1;
    return TR_OK;
}

static tr_status plan_model(hf_model *m, plan *p) {
    int64_t H = m->H, F = m->F;
    const tr_init N = TR_INIT_NORMAL, Z = TR_INIT_ZEROS, O = TR_INIT_ONES;
    double r = m->init_range;
#define ADD(ix, nd, a, b, init, opt, fmt, l) TR_CHECK(want_add(p, ix, nd, a, b, init, (init) == N ? r : 0, opt, fmt, l))
    ADD(&m->word_emb, 2, m->V, H, N, 0, "embeddings.word_embeddings.weight", 0);
    ADD(&m->pos_emb, 2, m->S, H, N, 0, "embeddings.position_embeddings.weight", 0);
    ADD(&m->type_emb, 2, m->type_vocab, H, N, 0, "embeddings.token_type_embeddings.weight", 0);
    ADD(&m->emb_ln_w, 1, H, 0, O, 0, "embeddings.LayerNorm.weight", 0);
    ADD(&m->emb_ln_b, 1, H, 0, Z, 0, "embeddings.LayerNorm.bias", 0);
    for (int i = 0; i < m->n_layer; i++) {
        hf_layer *k = &m->layer[i];
        ADD(&k->q_w, 2, H, H, N, 0, "encoder.layer.%d.attention.self.query.weight", i);
        ADD(&k->q_b, 1, H, 0, Z, 0, "encoder.layer.%d.attention.self.query.bias", i);
        ADD(&k->k_w, 2, H, H, N, 0, "encoder.layer.%d.attention.self.key.weight", i);
        ADD(&k->k_b, 1, H, 0, Z, 0, "encoder.layer.%d.attention.self.key.bias", i);
        ADD(&k->v_w, 2, H, H, N, 0, "encoder.layer.%d.attention.self.value.weight", i);
        ADD(&k->v_b, 1, H, 0, Z, 0, "encoder.layer.%d.attention.self.value.bias", i);
        ADD(&k->ao_w, 2, H, H, N, 0, "encoder.layer.%d.attention.output.dense.weight", i);
        ADD(&k->ao_b, 1, H, 0, Z, 0, "encoder.layer.%d.attention.output.dense.bias", i);
        ADD(&k->ao_ln_w, 1, H, 0, O, 0, "encoder.layer.%d.attention.output.LayerNorm.weight", i);
        ADD(&k->ao_ln_b, 1, H, 0, Z, 0, "encoder.layer.%d.attention.output.LayerNorm.bias", i);
        ADD(&k->in_w, 2, F, H, N, 0, "encoder.layer.%d.intermediate.dense.weight", i);
        ADD(&k->in_b, 1, F, 0, Z, 0, "encoder.layer.%d.intermediate.dense.bias", i);
        ADD(&k->out_w, 2, H, F, N, 0, "encoder.layer.%d.output.dense.weight", i);
        ADD(&k->out_b, 1, H, 0, Z, 0, "encoder.layer.%d.output.dense.bias", i);
        ADD(&k->out_ln_w, 1, H, 0, O, 0, "encoder.layer.%d.output.LayerNorm.weight", i);
        ADD(&k->out_ln_b, 1, H, 0, Z, 0, "encoder.layer.%d.output.LayerNorm.bias", i);
    }
    /* The pooler: optional in a file (BertModel(add_pooling_layer=False) saves none); when
     * absent it is made only if the task needs it. */
    ADD(&m->pool_w, 2, H, H, N, 2, "pooler.dense.weight", 0);
    ADD(&m->pool_b, 1, H, 0, Z, 2, "pooler.dense.bias", 0);
    m->cls_w = m->cls_b = m->cls_dense_w = m->cls_dense_b = -1;
    if (m->classify && m->roberta) { /* RobertaClassificationHead */
        ADD(&m->cls_dense_w, 2, H, H, N, 1, "classifier.dense.weight", 0);
        ADD(&m->cls_dense_b, 1, H, 0, Z, 1, "classifier.dense.bias", 0);
        ADD(&m->cls_w, 2, m->num_labels, H, N, 1, "classifier.out_proj.weight", 0);
        ADD(&m->cls_b, 1, m->num_labels, 0, Z, 1, "classifier.out_proj.bias", 0);
    } else if (m->classify) {
        ADD(&m->cls_w, 2, m->num_labels, H, N, 1, "classifier.weight", 0);
        ADD(&m->cls_b, 1, m->num_labels, 0, Z, 1, "classifier.bias", 0);
    }
#undef ADD
    return TR_OK;
}

static int same_shape(const want *w, const tr_st_entry *e) {
    if (e->ndim != w->ndim) return 0;
    for (int d = 0; d < w->ndim; d++)
        if (e->shape[d] != w->shape[d]) return 0;
    return 1;
}

/* Elements [start, start + count) of parameter `index` from its tensor in the files: only
 * those bytes are read (the files are mapped), so a sharded rank reads its pieces alone. */
static tr_status fill(void *ctx, int index, float *data, size_t start, size_t count) {
    hf_model *m = ctx;
    if (!data) { /* no more fills: the files' memory goes back */
        hf_files_close(m);
        return TR_OK;
    }
    const tr_st_entry *e = index >= 0 && index < m->n_src ? m->src[index].e : NULL;
    if (!e || m->n_files == 0) return tr_error_set(TR_ERR_INVALID, "hf_encoder: parameter %d has no source", index);
    const tr_safetensors *f = m->src[index].f;
    if (e->dtype == TR_F32) /* may be unaligned */
        return tr_safetensors_copy(f, data, (const char *)e->data + 4 * start, count * sizeof(float));
    uint16_t h[4096]; /* read a run at a time, upcast */
    for (size_t at = 0; at < count; at += 4096) {
        size_t n = count - at < 4096 ? count - at : 4096;
        TR_CHECK(tr_safetensors_copy(f, h, (const char *)e->data + 2 * (start + at), n * sizeof *h));
        for (size_t i = 0; i < n; i++) data[at + i] = e->dtype == TR_F16 ? tr_f16_to_f32(h[i]) : tr_bf16_to_f32(h[i]);
    }
    return TR_OK;
}

tr_status hf_register(hf_model *m, tr_params *P) {
    plan p = {0};
    tr_status st = plan_model(m, &p);
    char ignored[1024] = "";
    int n_ignored = 0;
    /* Every tensor of the files: where it goes, or ignored, or unexpected. */
    for (int f = 0; f < m->n_files && st == TR_OK; f++) {
        for (int i = 0; i < tr_safetensors_count(m->files[f]) && st == TR_OK; i++) {
            const tr_st_entry *e = tr_safetensors_at(m->files[f], i);
            char name[256];
            canonical(e->name, name, sizeof name);
            int unused_pooler = m->classify && m->roberta && strncmp(name, "pooler.", 7) == 0;
            if (!name[0] || unused_pooler || (!m->classify && strncmp(name, "classifier.", 11) == 0)) {
                size_t k = strlen(ignored);
                if (k + strlen(e->name) + 8 < sizeof ignored)
                    snprintf(ignored + k, sizeof ignored - k, "%s%s", n_ignored ? ", " : "", e->name);
                n_ignored++;
                continue;
            }
            want *w = NULL;
            for (int j = 0; j < p.n && !w; j++)
                if (strcmp(p.w[j].name, name) == 0) w = &p.w[j];
            char fs[96], ms[96];
            shape_str(fs, sizeof fs, e->ndim, e->shape);
            if (!w) {
                st = tr_error_set(TR_ERR_INVALID, "hf_encoder: unexpected tensor %s %s in %s (not part of a %d-layer "
                                                  "BERT encoder)", e->name, fs, m->dir, m->n_layer);
            } else if (w->e) {
                st = tr_error_set(TR_ERR_INVALID, "hf_encoder: %s: tensor %s is given twice (%s and %s)", m->dir, name,
                                  w->file, e->name);
            } else if (e->dtype != TR_F32 && e->dtype != TR_F16 && e->dtype != TR_BF16) {
                st = tr_error_set(TR_ERR_INVALID, "hf_encoder: tensor %s in %s is %s (F32, F16 or BF16 load)", e->name,
                                  m->dir, tr_dtype_name(e->dtype));
            } else if (!same_shape(w, e)) {
                shape_str(ms, sizeof ms, w->ndim, w->shape);
                st = tr_error_set(TR_ERR_INVALID, "hf_encoder: tensor %s has shape %s in %s, the model built from its "
                                                  "config.json needs %s", e->name, fs, m->dir, ms);
            } else {
                w->e = e;
                w->f = m->files[f];
                w->file = e->name;
            }
        }
    }
    /* BERT's classifier reads the pooler; RoBERTa's has its own dense layer (and the plugin
     * ignores a pooler in the file, as RobertaForSequenceClassification does). */
    int need_pooler = (m->classify && !m->roberta) || (!m->classify && m->pooling == HF_POOL_POOLER);
    /* The pooler is a parameter when the folder has one or something needs it (RoBERTa's head
     * aside), or, at a resume, when the run's kept config.json says it was. */
    int pooler = m->kept_pooler >= 0 ? m->kept_pooler : need_pooler;
    for (int j = 0; j < p.n && st == TR_OK && !m->restored; j++) {
        want *w = &p.w[j];
        if (w->e || (w->optional == 2 && need_pooler) || w->optional == 1) continue;
        if (w->optional == 2) continue; /* a pooler nothing uses */
        char ms[96];
        shape_str(ms, sizeof ms, w->ndim, w->shape);
        st = tr_error_set(TR_ERR_INVALID, "hf_encoder: missing tensor %s %s in %s", w->name, ms, m->dir);
    }
    if (st == TR_OK) {
        char fresh[512] = "";
        m->src = calloc((size_t)p.n, sizeof *m->src);
        m->n_src = p.n;
        if (!m->src) st = tr_error_set(TR_ERR_NOMEM, "hf_encoder: out of memory");
        for (int j = 0; j < p.n && st == TR_OK; j++) {
            want *w = &p.w[j];
            if (w->optional == 2 && (m->kept_pooler >= 0 ? !pooler : (m->classify && m->roberta) || (!w->e && !pooler)))
                continue;
            st = tr_params_add(P, w->name, w->ndim, w->shape, w->init, w->arg, w->index);
            if (st != TR_OK) break;
            if (w->e && !m->restored) {
                m->src[*w->index] = (hf_source){.e = w->e, .f = w->f};
                st = tr_params_set_fill_range(P, *w->index, fill, m);
            } else {
                size_t k = strlen(fresh);
                if (k + strlen(w->name) + 4 < sizeof fresh)
                    snprintf(fresh + k, sizeof fresh - k, "%s%s", k ? ", " : "", w->name);
            }
        }
        if (st == TR_OK && fresh[0] && !m->restored)
            TR_INFO("hf_encoder: newly initialised (not in %s): %s; train the model before using it for predictions",
                    m->dir, fresh);
        if (st == TR_OK && n_ignored && !m->restored)
            TR_INFO("hf_encoder: %d tensor%s of %s not used: %s", n_ignored, n_ignored == 1 ? "" : "s", m->dir, ignored);
    }
    free(p.w);
    if (m->restored) hf_files_close(m); /* read for the names only: the checkpoint has the values */
    return st;
}

/* ---- debug: hidden states and logits to .npy ---- */

void hf_dump(const hf_model *m, tr_graph *g, const char *name, const tr_tensor *x) {
    if (!m->dump_dir || !x || x->device.kind != TR_DEVICE_CPU || tr_graph_status(g) != TR_OK) return;
    char p[4200], hdr[160];
    snprintf(p, sizeof p, "%s/%s.npy", m->dump_dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) {
        TR_WARN("hf_encoder: TR_HF_ENCODER_DUMP: cannot write %s: %s", p, strerror(errno));
        return;
    }
    int n = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    for (int d = 0; d < x->ndim; d++) n += snprintf(hdr + n, sizeof hdr - (size_t)n, "%lld, ", (long long)x->shape[d]);
    n += snprintf(hdr + n, sizeof hdr - (size_t)n, "), }");
    int total = (10 + n + 1 + 63) / 64 * 64;
    while (10 + n + 1 < total) hdr[n++] = ' ';
    hdr[n++] = '\n';
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n & 255), (unsigned char)(n >> 8)};
    fwrite(pre, 1, 10, f);
    fwrite(hdr, 1, (size_t)n, f);
    fwrite(x->data, sizeof(float), (size_t)tr_tensor_numel(x), f);
    fclose(f);
}
