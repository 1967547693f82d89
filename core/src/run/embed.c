/* `trainer embed`: the pooled embedding of every line of a text file, in input order, from a
 * model that gives one (out->embedding: hf_encoder's task embed, the transformer's pooling),
 * written to .npy (float32, (N, E)). The texts are the config's tokenizer's ids
 * (data.params.tokenizer, else the model's pretrained folder), [CLS] ... [SEP], truncated to
 * data.params.max_length (else the file's truncation, else 512) and padded with -1; batches
 * of data.batch_size are cut to their longest text. The config's dataset is not opened: these
 * texts take its place. One process (cpu, dataparallel and single-gpu strategies; ddp and
 * sharded run as dataparallel replicas, one per rank they would have). With
 * text<TAB>pair lines (every line then has one TAB) both texts are embedded alone, written as
 * (N, 2, E), and each pair's cosine similarity (the dot product of normalized embeddings, as
 * bge-m3 scores) goes to a CSV `index,score`. Progress: run/progress.c's bar on a terminal
 * (trainer.progress auto or bar), lines every trainer.log_every batches with `lines`. */
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "run/run_api.h"
#include "trainer/io.h"
#include "trainer/ops.h"
#include "trainer/runtime.h"
#include "trainer/tokenizer.h"

typedef struct lines_ds {
    int32_t *ids;  /* (n, T), -1 padding; pairs: rows 2i and 2i + 1 are line i's two texts */
    int64_t n, T, vocab;
    int pairs;     /* every line is text<TAB>pair */
} lines_ds;

static void lines_destroy(void *ctx) {
    lines_ds *d = ctx;
    if (!d) return;
    free(d->ids);
    free(d);
}

static void lines_spec(void *ctx, tr_data_spec *s) {
    lines_ds *d = ctx;
    s->task = TR_TASK_REGRESS;
    s->x_dtype = TR_I32;
    s->x_ndim = 1;
    s->x_shape[0] = d->T;
    s->x_numel = d->T;
    s->y_dtype = TR_F32;
    s->y_ndim = 1;
    s->y_shape[0] = 1;
    s->y_numel = 1;
    s->vocab = d->vocab;
    s->x_trim_pad = 1;
}

static int64_t lines_size(void *ctx) { return ((lines_ds *)ctx)->n; }

static tr_status lines_get(void *ctx, int64_t i, void *x, void *y) {
    lines_ds *d = ctx;
    memcpy(x, d->ids + i * d->T, (size_t)d->T * sizeof(int32_t));
    if (y) *(float *)y = 0.0f;
    return TR_OK;
}

static const tr_dataset_ops lines_ops = {
    .destroy = lines_destroy, .spec = lines_spec, .size = lines_size, .get = lines_get};

/* The tokenizer and max_length the config gives (see the file's comment). */
static tr_status open_tokenizer(job *j, tr_tokenizer **tok, int64_t *max_len) {
    const char *path = NULL;
    TR_CHECK(tr_cfg_get_string(j->root, "data.params.tokenizer", NULL, &path, 0));
    if (!path || !*path) TR_CHECK(tr_cfg_get_string(j->root, "model.params.pretrained", NULL, &path, 0));
    if (!path || !*path)
        return tr_error_set(TR_ERR_INVALID, "embed: the config names no tokenizer: set data.params.tokenizer (or "
                                            "model.params.pretrained, a folder with tokenizer.json)");
    char full[2048];
    tr_path_resolve(full, sizeof full, j->cfg_dir, path);
    TR_CHECK(tr_tokenizer_load(tok, full));
    TR_CHECK(tr_cfg_get_int(j->root, "data.params.max_length", 0, 0, 1 << 24, max_len, 0));
    tr_truncation t;
    TR_CHECK(tr_tokenizer_truncation(*tok, &t));
    if (*max_len == 0) *max_len = t.enabled ? (int64_t)t.max_length : 512;
    t.enabled = 1;
    t.max_length = (size_t)*max_len;
    TR_CHECK(tr_tokenizer_set_truncation(*tok, &t));
    return tr_tokenizer_set_padding(*tok, NULL);
}

/* Appends the ids of one text as row d->n (room for it made by the caller). */
static tr_status encode_row(lines_ds *d, const tr_tokenizer *tok, const char *text, size_t len) {
    tr_encoding enc;
    TR_CHECK(tr_tokenizer_encode(tok, text, len, NULL, 0, 1, &enc));
    int32_t *row = d->ids + d->n * d->T;
    for (int64_t k = 0; k < d->T; k++) row[k] = k < (int64_t)enc.len ? enc.ids[k] : TR_PAD_ID;
    tr_encoding_free(&enc);
    d->n++;
    return TR_OK;
}

static tr_status read_lines(job *j, const char *input, lines_ds **out) {
    char *text = NULL;
    size_t len = 0;
    TR_CHECK(tr_file_read(input, &text, &len));
    tr_tokenizer *tok = NULL;
    int64_t T = 0;
    tr_status st = open_tokenizer(j, &tok, &T);
    lines_ds *d = st == TR_OK ? calloc(1, sizeof *d) : NULL;
    if (st == TR_OK && !d) st = tr_error_set(TR_ERR_NOMEM, "embed: out of memory");
    if (d) {
        d->T = T;
        d->pairs = memchr(text, '\t', len) != NULL;
    }
    int64_t cap = 0, lineno = 0;
    for (char *p = text; st == TR_OK && p < text + len;) {
        char *e = memchr(p, '\n', (size_t)(text + len - p));
        size_t l = e ? (size_t)(e - p) : (size_t)(text + len - p);
        lineno++;
        if (l && p[l - 1] == '\r') l--;
        if (d->n + 2 > cap) {
            cap = cap ? 2 * cap : 1024;
            int32_t *ids = realloc(d->ids, (size_t)(cap * T) * sizeof *ids);
            if (!ids) {
                st = tr_error_set(TR_ERR_NOMEM, "embed: out of memory");
                break;
            }
            d->ids = ids;
        }
        char *tab = memchr(p, '\t', l);
        if (d->pairs && (!tab || memchr(tab + 1, '\t', l - (size_t)(tab + 1 - p)))) {
            st = tr_error_set(TR_ERR_INVALID, "%s:%lld: expected 'text<TAB>pair' (one TAB), as the file's other "
                                              "lines: %s", input, (long long)lineno, tab ? "more than one TAB" : "no TAB");
            break;
        }
        st = d->pairs ? encode_row(d, tok, p, (size_t)(tab - p)) : encode_row(d, tok, p, l);
        if (st == TR_OK && d->pairs) st = encode_row(d, tok, tab + 1, l - (size_t)(tab + 1 - p));
        if (st != TR_OK) {
            tr_error_prefix("%s:%lld: ", input, (long long)lineno);
            break;
        }
        p += (e ? (size_t)(e - p) + 1 : l);
    }
    if (st == TR_OK && d->n == 0) st = tr_error_set(TR_ERR_INVALID, "embed: %s holds no line of text", input);
    if (st == TR_OK) {
        d->vocab = (int64_t)tr_tokenizer_id_bound(tok); /* sparse added or special ids included */
        *out = d;
    } else {
        lines_destroy(d);
    }
    tr_tokenizer_free(tok);
    free(text);
    return st;
}

static tr_status make_parent(const char *path) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    return tr_mkdirs(dirname(dir));
}

/* v (shape[0] x ... ) as .npy float32. */
static tr_status write_npy(const char *path, const float *v, int ndim, const int64_t *shape) {
    TR_CHECK(make_parent(path));
    FILE *f = fopen(path, "wb");
    if (!f) return tr_error_set(TR_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    char hdr[192];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        n += snprintf(hdr + n, sizeof hdr - (size_t)n, "%lld, ", (long long)shape[i]);
        numel *= shape[i];
    }
    n += snprintf(hdr + n, sizeof hdr - (size_t)n, "), }");
    while ((10 + n + 1) % 64) hdr[n++] = ' ';
    hdr[n++] = '\n';
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n & 255), (unsigned char)(n >> 8)};
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, (size_t)n, f) == (size_t)n &&
             fwrite(v, sizeof(float), (size_t)numel, f) == (size_t)numel;
    if (fclose(f) != 0) ok = 0;
    return ok ? TR_OK : tr_error_set(TR_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
}

/* index,score: the cosine similarity of rows 2i and 2i + 1 of v (n_pairs x 2 x E). */
static tr_status write_scores(const char *path, const float *v, int64_t n_pairs, int64_t E) {
    TR_CHECK(make_parent(path));
    FILE *f = fopen(path, "w");
    if (!f) return tr_error_set(TR_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    fprintf(f, "index,score\n");
    for (int64_t i = 0; i < n_pairs; i++) {
        const float *a = v + 2 * i * E, *b = a + E;
        double ab = 0, aa = 0, bb = 0;
        for (int64_t k = 0; k < E; k++) {
            ab += (double)a[k] * b[k];
            aa += (double)a[k] * a[k];
            bb += (double)b[k] * b[k];
        }
        double den = sqrt(aa) * sqrt(bb);
        fprintf(f, "%lld,%.9g\n", (long long)i, den > 0 ? ab / den : 0.0);
    }
    int ok = !ferror(f);
    if (fclose(f) != 0) ok = 0;
    return ok ? TR_OK : tr_error_set(TR_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
}

/* job_plan for embed: a strategy of several processes (ddp, sharded) runs as as many
 * dataparallel replicas in this one (forward only: no gradient to synchronise, no optimizer
 * state to shard, and the same embeddings; the texts stay in this process, in order). Under
 * a launcher that started several ranks, each would embed every text: refused. */
static tr_status embed_plan(job *j, const char *config_path, const char *const *overrides, int n_overrides,
                            const char *const *plugin_dirs) {
    TR_CHECK(job_plan(j, config_path, overrides, n_overrides, plugin_dirs));
    int ranks = job_world(j, NULL);
    if (ranks <= 1) return TR_OK;
    if (tr_launched_externally())
        return tr_error_set(TR_ERR_INVALID, "embed: runs in one process, and a launcher started %d ranks: run trainer "
                                            "embed without the launcher (%s then runs as %d dataparallel replicas)",
                            ranks, j->strat_p->desc->name, ranks);
    char name[64], devices[48];
    snprintf(name, sizeof name, "%s", j->strat_p->desc->name);
    snprintf(devices, sizeof devices, "trainer.devices=%d", ranks);
    const char **ov = malloc((size_t)(n_overrides + 3) * sizeof *ov);
    if (!ov) return tr_error_set(TR_ERR_NOMEM, "embed: out of memory");
    for (int i = 0; i < n_overrides; i++) ov[i] = overrides[i];
    ov[n_overrides] = "trainer.strategy=dataparallel";
    ov[n_overrides + 1] = "strategy={}"; /* the other strategy's options */
    ov[n_overrides + 2] = devices;
    job_close(j);
    memset(j, 0, sizeof *j);
    tr_status st = job_plan(j, config_path, ov, n_overrides + 3, plugin_dirs);
    free(ov);
    TR_CHECK(st);
    job_say(j, "embed: %s's %d ranks run as %d dataparallel replicas in this process (the same embeddings)", name, ranks,
            ranks);
    return TR_OK;
}

static tr_status embed_job(job *j, const char *config_path, const char *const *overrides, int n_overrides,
                           const char *const *plugin_dirs, const char *checkpoint, const char *input,
                           const char *output, const char *scores, tr_embed_result *res) {
    memset(res, 0, sizeof *res);
    TR_CHECK(embed_plan(j, config_path, overrides, n_overrides, plugin_dirs));
    lines_ds *d;
    TR_CHECK(read_lines(j, input, &d));
    j->dops_table = lines_ops;
    j->dops = &j->dops_table;
    j->train_ds = d;  /* job_close destroys it */
    j->s.shuffle = 0; /* in input order, every text */
    j->s.drop_last = 0;
    if (checkpoint) {
        TR_CHECK(job_resolve_checkpoint(j, checkpoint, res->checkpoint, sizeof res->checkpoint));
        snprintf(j->ckpt_path, sizeof j->ckpt_path, "%s", res->checkpoint);
    }
    TR_CHECK(job_open_planned(j));
    if (checkpoint) {
        tr_train_state state;
        TR_CHECK(job_load_checkpoint(j, res->checkpoint, 0, &state));
    }
    int64_t N = d->n, E = 0, done = 0, batches = 0;
    float *all = NULL;
    tr_status st = tr_loader_start_epoch(j->train_L, 0, 0);
    const tr_host_batch *hb;
    double t0 = tr_now();
    /* A bar on a terminal (trainer.progress auto or bar); lines every log_every batches with
     * trainer.progress=lines; nothing otherwise (the summary line says it all). */
    progress_init(&j->prog, j->s.progress, 0);
    while (st == TR_OK && (st = tr_loader_next(j->train_L, &hb)) == TR_OK && hb) {
        tr_model_out mo;
        st = j->sops->forward(j->strat, hb, 0, &mo);
        if (st != TR_OK) break;
        if (!mo.embedding || mo.embedding->ndim != 2 || mo.embedding->shape[0] != hb->size) {
            st = tr_error_set(TR_ERR_INVALID, "embed: model %s gives no pooled embedding (B, E) (hf_encoder: task "
                                              "embed; transformer: mode classify)", j->model_p->desc->name);
            break;
        }
        if (!all) {
            E = mo.embedding->shape[1];
            all = malloc((size_t)(N * E) * sizeof *all);
            if (!all) {
                st = tr_error_set(TR_ERR_NOMEM, "embed: out of memory for %lld x %lld floats", (long long)N, (long long)E);
                break;
            }
        }
        if (mo.embedding->shape[1] != E || hb->first < 0 || hb->first + hb->size > N) {
            st = tr_error_set(TR_ERR_INVALID, "embed: batch %lld gives %lld x %lld embeddings for texts %lld.. of %lld "
                                              "(width %lld before)", (long long)hb->index, (long long)hb->size,
                              (long long)mo.embedding->shape[1], (long long)hb->first, (long long)N, (long long)E);
            break;
        }
        memcpy(all + hb->first * E, mo.embedding->data, (size_t)(hb->size * E) * sizeof *all);
        done += hb->size;
        batches++;
        double el = tr_now() - t0, rate = el > 0 ? (double)done / el : 0.0;
        progress_update_pass(&j->prog, "embed", done, N, rate, "texts");
        if (j->s.progress == 2 && (batches % j->s.log_every == 0 || done == N))
            job_say(j, "embed: %lld/%lld texts  %.0f texts/s", (long long)done, (long long)N, rate);
    }
    progress_end(&j->prog);
    double dt = tr_now() - t0;
    int64_t lines = d->pairs ? N / 2 : N;
    char scores_path[1100] = "";
    if (d->pairs) {
        size_t k = strlen(output);
        if (scores) snprintf(scores_path, sizeof scores_path, "%s", scores);
        else if (k > 4 && strcmp(output + k - 4, ".npy") == 0) snprintf(scores_path, sizeof scores_path, "%.*s.csv", (int)(k - 4), output);
        else snprintf(scores_path, sizeof scores_path, "%s.csv", output);
    }
    if (st == TR_OK)
        st = d->pairs ? write_npy(output, all, 3, (int64_t[]){lines, 2, E}) : write_npy(output, all, 2, (int64_t[]){N, E});
    if (st == TR_OK && d->pairs) st = write_scores(scores_path, all, lines, E);
    free(all);
    TR_CHECK(st);
    res->texts = lines;
    res->dim = E;
    res->pairs = d->pairs;
    job_say(j, "embed: %lld %s -> %s (%lld%s x %lld float32) in %.3f s (%.0f texts/s, %s)", (long long)lines,
            d->pairs ? "pairs" : "texts", output, (long long)lines, d->pairs ? " x 2" : "", (long long)E, dt,
            dt > 0 ? (double)N / dt : 0.0, j->info.description);
    if (d->pairs) job_say(j, "embed: pair scores (cosine similarity) -> %s", scores_path);
    return TR_OK;
}

tr_status tr_run_embed(const char *config_path, const char *const *overrides, int n_overrides,
                       const char *const *plugin_dirs, const char *checkpoint, const char *input,
                       const char *output, const char *scores, tr_embed_result *out) {
    job j;
    memset(&j, 0, sizeof j);
    tr_status st = embed_job(&j, config_path, overrides, n_overrides, plugin_dirs, checkpoint, input, output, scores, out);
    job_close(&j);
    return st;
}
