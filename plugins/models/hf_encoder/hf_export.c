/* hf_encoder's export (tr_model_ops.export_to, `trainer export --format hf`): the model as a
 * Hugging Face folder that transformers' AutoModel (task embed, and pairs: a bi-encoder) or
 * AutoModelForSequenceClassification (task classify) loads with no missing or unexpected key:
 * config.json (the pretrained folder's, with architectures, the labels and torch_dtype
 * float32), model.safetensors (F32, transformers' names: AutoModel's for embed; under the
 * bert. / roberta. prefix with the head's classifier.* for classify), the tokenizer files and,
 * for embed, sentence-transformers' files when the run pools and normalises as they say. The
 * core made env->dir and renames it into place; every failure names the file. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hf_encoder.h"
#include "trainer/log.h"
#include "trainer/safetensors.h"

/* The tokenizer files transformers' AutoTokenizer reads, where a folder has them. */
static const char *const tokenizer_files[] = {
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "vocab.txt",
    "vocab.json", "merges.txt", "sentencepiece.bpe.model", "spiece.model", "tokenizer.model"};
/* sentence-transformers' files beside the model (each module's folder comes from modules.json). */
static const char *const st_files[] = {"modules.json", "sentence_bert_config.json", "config_sentence_transformers.json"};
#define N_(a) (sizeof(a) / sizeof((a)[0]))

static int is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static tr_status join(char *out, size_t cap, const char *a, const char *b) {
    if (snprintf(out, cap, "%s/%s", a, b) >= (int)cap) return tr_error_set(TR_ERR_INVALID, "hf_encoder: %s/%s: path too long", a, b);
    return TR_OK;
}

/* src's bytes into a new file dst. */
static tr_status copy_file(const char *src, const char *dst) {
    int in = open(src, O_RDONLY);
    if (in < 0) return tr_error_set(TR_ERR_IO, "hf_encoder: export: cannot read %s: %s", src, strerror(errno));
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (out < 0) {
        close(in);
        return tr_error_set(TR_ERR_IO, "hf_encoder: export: cannot create %s: %s", dst, strerror(errno));
    }
    tr_status st = TR_OK;
    char buf[1 << 16];
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) st = tr_error_set(TR_ERR_IO, "hf_encoder: export: cannot read %s: %s", src, strerror(errno));
        if (n <= 0) break;
        for (ssize_t done = 0; st == TR_OK && done < n;) {
            ssize_t w = write(out, buf + done, (size_t)(n - done));
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) st = tr_error_set(TR_ERR_IO, "hf_encoder: export: cannot write %s: %s", dst, strerror(w < 0 ? errno : ENOSPC));
            else done += w;
        }
        if (st != TR_OK) break;
    }
    if (close(out) != 0 && st == TR_OK)
        st = tr_error_set(TR_ERR_IO, "hf_encoder: export: cannot write %s: %s", dst, strerror(errno));
    close(in);
    return st;
}

/* name (a path relative to both folders) from src_dir into dir, when src_dir has it. */
static tr_status copy_if_there(const char *src_dir, const char *dir, const char *name) {
    char src[4200], dst[4200];
    TR_CHECK(join(src, sizeof src, src_dir, name));
    if (!is_file(src)) return TR_OK;
    TR_CHECK(join(dst, sizeof dst, dir, name));
    return copy_file(src, dst);
}

/* The fewest significant digits (15 to 17) that write every real of v so it reads back the
 * same: 1e-12 rather than 9.9999999999999998e-13, and still exact. */
static int real_digits(const json_t *v) {
    int d = 15;
    if (json_is_real(v)) {
        char text[40];
        double x = json_real_value(v);
        while (d < 17 && (snprintf(text, sizeof text, "%.*g", d, x), strtod(text, NULL) != x)) d++;
    } else if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) {
            int n = real_digits(x);
            d = n > d ? n : d;
        }
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            int n = real_digits(json_array_get(v, i));
            d = n > d ? n : d;
        }
    }
    return d;
}

static tr_status write_json(json_t *o, const char *dir, const char *name) {
    char path[4200];
    TR_CHECK(join(path, sizeof path, dir, name));
    errno = 0;
    if (json_dump_file(o, path, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(real_digits(o))) != 0)
        return tr_error_set(TR_ERR_IO, "hf_encoder: export: cannot write %s: %s", path, errno ? strerror(errno) : "error");
    return TR_OK;
}

/* transformers' class for the folder's model_type and the task. */
static const char *architecture(const char *model_type, int classify) {
    if (strcmp(model_type, "xlm-roberta") == 0) return classify ? "XLMRobertaForSequenceClassification" : "XLMRobertaModel";
    if (strcmp(model_type, "roberta") == 0) return classify ? "RobertaForSequenceClassification" : "RobertaModel";
    return classify ? "BertForSequenceClassification" : "BertModel";
}

/* config.json: the pretrained folder's (else, that folder gone, the copy the checkpoint keeps,
 * without the run's own key), with the architecture, the run's labels and the dtype. */
static tr_status write_config(const hf_model *m, const tr_model_export *env) {
    char src[4200];
    TR_CHECK(join(src, sizeof src, m->folder, "config.json"));
    json_error_t err;
    json_t *c = NULL;
    if (is_file(src) || !m->from_checkpoint) {
        c = json_load_file(src, 0, &err);
    } else {
        TR_CHECK(join(src, sizeof src, m->dir, "config.json"));
        TR_INFO("hf_encoder: export: %s has no config.json: the checkpoint's copy %s", m->folder, src);
        c = json_loadb(m->config_text, m->config_len, 0, &err);
    }
    if (!c || !json_is_object(c)) {
        json_decref(c);
        return tr_error_set(TR_ERR_PARSE, "hf_encoder: export: %s:%d: %s", src, err.line, c ? "not an object" : err.text);
    }
    json_object_del(c, HF_KEPT_KEY);
    const char *type = json_string_value(json_object_get(c, "model_type"));
    int bad = json_object_set_new(c, "architectures", json_pack("[s]", architecture(type ? type : "bert", m->classify))) != 0;
    bad |= json_object_set_new(c, "torch_dtype", json_string("float32")) != 0;
    if (m->classify) {
        json_t *id2label = json_object(), *label2id = json_object();
        for (int64_t i = 0; !bad && i < m->num_labels; i++) {
            char id[32], fallback[48];
            snprintf(id, sizeof id, "%lld", (long long)i);
            snprintf(fallback, sizeof fallback, "LABEL_%lld", (long long)i);
            const char *name = env->class_names && i < env->n_classes && env->class_names[i] ? env->class_names[i] : fallback;
            json_t *s = json_string(name);
            if (!s) {
                json_decref(id2label);
                json_decref(label2id);
                json_decref(c);
                return tr_error_set(TR_ERR_INVALID, "hf_encoder: export: class %lld's name is not UTF-8 text", (long long)i);
            }
            bad = json_object_set_new(id2label, id, s) || json_object_set_new(label2id, name, json_integer(i));
        }
        /* set_new takes each value whether or not it fails: no early exit before all four */
        bad |= json_object_set_new(c, "id2label", id2label) != 0;
        bad |= json_object_set_new(c, "label2id", label2id) != 0;
        bad |= json_object_set_new(c, "num_labels", json_integer(m->num_labels)) != 0;
        bad |= json_object_set_new(c, "problem_type", json_string("single_label_classification")) != 0;
    }
    tr_status st = bad ? tr_error_set(TR_ERR_NOMEM, "hf_encoder: export: out of memory for config.json")
                       : write_json(c, env->dir, "config.json");
    json_decref(c);
    return st;
}

/* model.safetensors: every parameter by transformers' name, F32. */
static tr_status write_weights(const hf_model *m, tr_params *P, const char *dir) {
    const char *prefix = !m->classify ? "" : m->roberta ? "roberta." : "bert.";
    int n = tr_params_count(P);
    tr_st_entry *e = calloc((size_t)(n > 0 ? n : 1), sizeof *e);
    char *names = calloc((size_t)(n > 0 ? n : 1), 160);
    tr_status st = e && names ? TR_OK : tr_error_set(TR_ERR_NOMEM, "hf_encoder: export: out of memory");
    for (int i = 0; i < n && st == TR_OK; i++) {
        const char *name = tr_params_name(P, i);
        const tr_tensor *t = tr_params_get(P, i);
        char *to = names + (size_t)i * 160;
        int head = strncmp(name, "classifier.", 11) == 0;
        if (snprintf(to, 160, "%s%s", head ? "" : prefix, name) >= 160)
            st = tr_error_set(TR_ERR_INVALID, "hf_encoder: export: parameter name %s too long", name);
        else if (!t || !t->data || t->dtype != TR_F32)
            st = tr_error_set(TR_ERR_INVALID, "hf_encoder: export: parameter %s has no F32 data on the host", name);
        else {
            e[i] = (tr_st_entry){.name = to, .dtype = TR_F32, .ndim = t->ndim, .data = t->data};
            memcpy(e[i].shape, t->shape, sizeof e[i].shape);
        }
    }
    char path[4200];
    if (st == TR_OK) st = join(path, sizeof path, dir, "model.safetensors");
    const char *meta[] = {"format", "pt"}; /* what transformers' loader asks of a safetensors file */
    if (st == TR_OK) st = tr_safetensors_write(path, e, n, meta, 1);
    free(e);
    free(names);
    return st;
}

/* The tokenizer: the run's data.params.tokenizer when it names another file than the
 * pretrained folder's tokenizer.json (then that file alone, as tokenizer.json: the folder's
 * other tokenizer files may describe another vocabulary), else the tokenizer files of the
 * folder it names or of the pretrained folder. */
static tr_status copy_tokenizer(const hf_model *m, const tr_model_export *env) {
    const char *from = m->folder;
    struct stat sb;
    if (env->tokenizer && stat(env->tokenizer, &sb) != 0)
        return tr_error_set(TR_ERR_IO, "hf_encoder: export: the run's tokenizer %s (data.params.tokenizer): %s",
                            env->tokenizer, strerror(errno));
    if (env->tokenizer && S_ISDIR(sb.st_mode)) {
        from = env->tokenizer;
    } else if (env->tokenizer) {
        char own[4200], a[PATH_MAX], b[PATH_MAX];
        TR_CHECK(join(own, sizeof own, m->folder, "tokenizer.json"));
        int same = realpath(env->tokenizer, a) && realpath(own, b) && strcmp(a, b) == 0;
        if (!same) {
            char dst[4200];
            TR_CHECK(join(dst, sizeof dst, env->dir, "tokenizer.json"));
            TR_INFO("hf_encoder: export: tokenizer.json is the run's %s (data.params.tokenizer); the tokenizer files "
                    "of %s are not copied", env->tokenizer, m->folder);
            return copy_file(env->tokenizer, dst);
        }
    }
    if (stat(from, &sb) != 0 || !S_ISDIR(sb.st_mode))
        TR_WARN("hf_encoder: export: the tokenizer's folder %s is not there: the export has no tokenizer files", from);
    for (size_t i = 0; i < N_(tokenizer_files); i++) TR_CHECK(copy_if_there(from, env->dir, tokenizer_files[i]));
    return TR_OK;
}

/* sentence-transformers' files, when the folder has them and the run pools and normalises as
 * they say (else they would describe another embedding than the run's). */
static tr_status copy_sentence_transformers(const hf_model *m, const char *dir) {
    char path[4200];
    TR_CHECK(join(path, sizeof path, m->folder, "modules.json"));
    if (!is_file(path)) return TR_OK;
    hf_model *files = calloc(1, sizeof *files);
    if (!files) return tr_error_set(TR_ERR_NOMEM, "hf_encoder: export: out of memory");
    snprintf(files->dir, sizeof files->dir, "%s", m->folder);
    int same = hf_pooling_read(files, "auto", "auto") == TR_OK && files->pooling == m->pooling &&
               files->normalize == m->normalize;
    free(files);
    tr_error_clear();
    if (!same) {
        TR_INFO("hf_encoder: export: sentence-transformers' files of %s not copied: the run's pooling or normalize "
                "differs from theirs", m->folder);
        return TR_OK;
    }
    for (size_t i = 0; i < N_(st_files); i++) TR_CHECK(copy_if_there(m->folder, dir, st_files[i]));
    json_error_t err;
    json_t *mods = json_load_file(path, 0, &err);
    if (!mods) return tr_error_set(TR_ERR_PARSE, "hf_encoder: export: %s:%d: %s", path, err.line, err.text);
    size_t i;
    json_t *mod;
    tr_status st = TR_OK;
    json_array_foreach(mods, i, mod) { /* each module's folder (1_Pooling, 2_Normalize) and its config */
        const char *sub = json_string_value(json_object_get(mod, "path"));
        if (!sub || !*sub) continue;
        if (strstr(sub, "..") || sub[0] == '/') {
            st = tr_error_set(TR_ERR_INVALID, "hf_encoder: export: %s names module path '%s' outside the folder", path, sub);
            break;
        }
        char to[4200], cfg[4200];
        st = join(to, sizeof to, dir, sub);
        if (st == TR_OK && mkdir(to, 0755) != 0 && errno != EEXIST)
            st = tr_error_set(TR_ERR_IO, "hf_encoder: export: cannot create the folder %s: %s", to, strerror(errno));
        if (st == TR_OK) st = join(cfg, sizeof cfg, sub, "config.json");
        if (st == TR_OK) st = copy_if_there(m->folder, dir, cfg);
        if (st != TR_OK) break;
    }
    json_decref(mods);
    return st;
}

tr_status hf_export(void *ctx, tr_params *P, const tr_model_export *env) {
    hf_model *m = ctx;
    if (strcmp(env->format, "hf") != 0)
        return tr_error_set(TR_ERR_UNSUPPORTED, "hf_encoder: export: format '%s' is not one this plugin writes (hf)",
                            env->format);
    if (m->classify && env->n_classes && env->n_classes != m->num_labels)
        return tr_error_set(TR_ERR_INVALID, "hf_encoder: export: the run has %lld classes, the model %lld outputs",
                            (long long)env->n_classes, (long long)m->num_labels);
    TR_CHECK(write_config(m, env));
    TR_CHECK(write_weights(m, P, env->dir));
    TR_CHECK(copy_tokenizer(m, env));
    return m->classify ? TR_OK : copy_sentence_transformers(m, env->dir);
}
