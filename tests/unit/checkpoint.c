/* Checkpoints: exact round trip (params, buffers, AdamW state, steps, train state), latest,
 * prune, and refusals that leave the model, optimizer and state untouched. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "trainer/checkpoint.h"
#include "trainer/safetensors.h"

static char root[64];

static void rm_rf(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            char sub[1024];
            snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
            rm_rf(sub);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static void copy_file(const char *src, const char *dst) {
    FILE *a = fopen(src, "rb"), *b = fopen(dst, "wb");
    char buf[4096];
    size_t n;
    while (a && b && (n = fread(buf, 1, sizeof buf, a)) > 0) fwrite(buf, 1, n, b);
    if (a) fclose(a);
    if (b) fclose(b);
}

static void copy_ckpt(const char *src, const char *dst) {
    mkdir(dst, 0755);
    const char *files[] = {"model.safetensors", "optimizer.safetensors", "state.json"};
    for (int i = 0; i < 3; i++) {
        char a[512], b[512];
        snprintf(a, sizeof a, "%s/%s", src, files[i]);
        snprintf(b, sizeof b, "%s/%s", dst, files[i]);
        copy_file(a, b);
    }
}

static int exists(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* fc.weight (h, 4), fc.bias (h), [fc3.bias (2)], [buffer bn.running_mean (h)], random values. */
static tr_params *make_params(int h, int extra, int buffer) {
    tr_params *P;
    int idx;
    tr_params_create(&P);
    tr_params_add(P, "fc.weight", 2, (int64_t[]){h, 4}, TR_INIT_UNIFORM, 1.0, &idx);
    tr_params_add(P, "fc.bias", 1, (int64_t[]){h}, TR_INIT_UNIFORM, 1.0, &idx);
    if (extra) tr_params_add(P, "fc3.bias", 1, (int64_t[]){2}, TR_INIT_UNIFORM, 1.0, &idx);
    if (buffer) tr_params_add_buffer(P, "bn.running_mean", 1, (int64_t[]){h}, TR_INIT_UNIFORM, 1.0, &idx);
    CHECK(tr_params_finalize(P, 7) == TR_OK, "finalize: %s", tr_error_msg());
    tr_tensor *b = tr_params_buffer(P, 0);
    for (int64_t i = 0; b && i < tr_tensor_numel(b); i++) ((float *)b->data)[i] = 0.5f + (float)i * 0.25f;
    return P;
}

typedef struct snapshot {
    float *data, *buf, *st[2];
    size_t n, nb;
    int nst;
    int64_t steps;
    tr_train_state s;
} snapshot;

static snapshot take(tr_params *P, tr_optim *opt, const tr_train_state *s) {
    snapshot z = {0};
    z.n = tr_params_numel(P);
    z.nb = tr_params_buffers_numel(P);
    z.data = malloc(z.n * sizeof(float));
    memcpy(z.data, tr_params_data(P), z.n * sizeof(float));
    z.buf = malloc(z.nb * sizeof(float) + 1);
    memcpy(z.buf, tr_params_buffers_data(P), z.nb * sizeof(float));
    z.nst = tr_optim_state_count(opt);
    for (int i = 0; i < z.nst; i++) {
        z.st[i] = malloc(z.n * sizeof(float));
        memcpy(z.st[i], tr_optim_state(opt, i), z.n * sizeof(float));
    }
    z.steps = tr_optim_steps(opt);
    z.s = *s;
    return z;
}

/* Bitwise equality with a snapshot (opt of the same length as P, or NULL). */
static int same(const snapshot *z, tr_params *P, tr_optim *opt, const tr_train_state *s) {
    int ok = memcmp(z->data, tr_params_data(P), z->n * sizeof(float)) == 0 &&
             memcmp(z->buf, tr_params_buffers_data(P), z->nb * sizeof(float)) == 0 &&
             memcmp(&z->s, s, sizeof *s) == 0;
    if (opt) {
        ok = ok && tr_optim_steps(opt) == z->steps && tr_optim_state_count(opt) == z->nst;
        for (int i = 0; ok && i < z->nst; i++)
            ok = memcmp(z->st[i], tr_optim_state(opt, i), z->n * sizeof(float)) == 0;
    }
    return ok;
}

static void drop(snapshot *z) {
    free(z->data);
    free(z->buf);
    for (int i = 0; i < z->nst; i++) free(z->st[i]);
}

static void scribble(tr_params *P, tr_optim *opt, tr_train_state *s) {
    /* Parameter slices only: the alignment gaps of the flat buffer stay zero. */
    for (int k = 0; k < tr_params_count(P); k++) {
        tr_tensor *t = tr_params_get(P, k);
        for (int64_t i = 0; i < tr_tensor_numel(t); i++) ((float *)t->data)[i] = -7.0f;
    }
    for (int k = 0; k < tr_params_buffer_count(P); k++) {
        tr_tensor *t = tr_params_buffer(P, k);
        for (int64_t i = 0; i < tr_tensor_numel(t); i++) ((float *)t->data)[i] = -9.0f;
    }
    for (int k = 0; k < tr_optim_state_count(opt); k++)
        for (size_t i = 0; i < tr_params_numel(P); i++) tr_optim_state(opt, k)[i] = 3.0f;
    tr_optim_set_steps(opt, 99);
    memset(s, 0x5a, sizeof *s);
    s->config_hash[0] = s->model[0] = '\0';
}

static tr_train_state state_at(int64_t step) {
    tr_train_state s = {.epoch = 2, .step = step, .batch_in_epoch = 17, .seed = 18446744073709551557ull};
    snprintf(s.config_hash, sizeof s.config_hash, "%064x", 0xabcdu);
    snprintf(s.model, sizeof s.model, "mlp");
    return s;
}

/* A refused load: the status, a message containing every needle, and nothing changed. */
static void expect_refused(const char *what, const char *path, tr_params *P, tr_optim *opt, const char *n1,
                           const char *n2) {
    tr_train_state s = state_at(1);
    snapshot z = take(P, opt, &s);
    tr_status st = tr_checkpoint_load(path, P, opt, &s);
    const char *m = tr_error_msg();
    CHECK(st != TR_OK, "%s: refused", what);
    CHECK(strstr(m, n1) && (!n2 || strstr(m, n2)), "%s: message '%s' lacks '%s' / '%s'", what, m, n1,
          n2 ? n2 : "");
    CHECK(same(&z, P, opt, &s), "%s: model, optimizer or state changed by a refused load", what);
    printf("%s: %s\n", what, m);
    drop(&z);
}

/* model.safetensors written by hand with an odd header length, so the F32 data is unaligned. */
static void write_unaligned_model(const char *path, tr_params *P) {
    int64_t h = tr_params_get(P, 0)->shape[0];
    size_t wb = (size_t)h * 4 * 4, bb = (size_t)h * 4;
    char hdr[512];
    int k = snprintf(hdr, sizeof hdr,
                     "{\"fc.bias\":{\"dtype\":\"F32\",\"shape\":[%lld],\"data_offsets\":[0,%zu]},"
                     "\"bn.running_mean\":{\"dtype\":\"F32\",\"shape\":[%lld],\"data_offsets\":[%zu,%zu]},"
                     "\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[%lld,4],\"data_offsets\":[%zu,%zu]}}",
                     (long long)h, bb, (long long)h, bb, 2 * bb, (long long)h, 2 * bb, 2 * bb + wb);
    while (k % 4 != 1) hdr[k++] = ' ';
    uint64_t len = (uint64_t)k;
    FILE *f = fopen(path, "wb");
    fwrite(&len, 8, 1, f);
    fwrite(hdr, 1, (size_t)k, f);
    fwrite(tr_params_get(P, 1)->data, 1, bb, f);
    fwrite(tr_params_buffer(P, 0)->data, 1, bb, f);
    fwrite(tr_params_get(P, 0)->data, 1, wb, f);
    fclose(f);
}

int main(void) {
    snprintf(root, sizeof root, "/tmp/trainer-ckpt-XXXXXX");
    CHECK(mkdtemp(root) != NULL, "mkdtemp");
    char dir[256], path[512], p2[1024];
    snprintf(dir, sizeof dir, "%s/runs/q/0/checkpoints", root); /* created by save (mkdir -p) */

    /* A model and an AdamW optimizer after 3 steps. */
    tr_params *P = make_params(3, 0, 1);
    size_t n = tr_params_numel(P);
    tr_optim_config oc = tr_optim_defaults(TR_OPTIM_ADAMW);
    tr_optim *opt;
    CHECK(tr_optim_create(&opt, &oc, n) == TR_OK, "optim");
    for (int step = 0; step < 3; step++) {
        /* Gradients inside the parameters only: the alignment gaps stay zero, as in training. */
        for (int k = 0; k < tr_params_count(P); k++) {
            size_t off = tr_params_offset(P, k), m = (size_t)tr_tensor_numel(tr_params_get(P, k));
            for (size_t i = off; i < off + m; i++)
                tr_params_grad(P)[i] = 0.1f * (float)((i * 7 + (size_t)step) % 5) - 0.2f;
        }
        CHECK(tr_optim_step(opt, tr_params_data(P), tr_params_grad(P), n, 1e-2) == TR_OK, "step");
    }
    CHECK(tr_optim_steps(opt) == 3, "3 steps taken");
    tr_train_state s = state_at(120);

    /* Round trip: bitwise. */
    CHECK(tr_checkpoint_save(dir, "step-00000120", P, opt, &s) == TR_OK, "save: %s", tr_error_msg());
    snprintf(path, sizeof path, "%s/step-00000120", dir);
    snapshot good = take(P, opt, &s);
    scribble(P, opt, &s);
    CHECK(!same(&good, P, opt, &s), "scribble changed everything");
    CHECK(tr_checkpoint_load(path, P, opt, &s) == TR_OK, "load: %s", tr_error_msg());
    CHECK(same(&good, P, opt, &s), "round trip is bitwise exact");
    CHECK(s.seed == 18446744073709551557ull && s.step == 120 && s.epoch == 2 && s.batch_in_epoch == 17 &&
              strcmp(s.model, "mlp") == 0 && strlen(s.config_hash) == 64,
          "train state fields");
    CHECK(tr_optim_steps(opt) == 3, "optimizer steps restored");
    /* Files carry the metadata HF tools and our loader expect. */
    snprintf(p2, sizeof p2, "%s/model.safetensors", path);
    tr_safetensors *f;
    CHECK(tr_safetensors_open(&f, p2) == TR_OK, "open model file");
    CHECK(tr_safetensors_count(f) == 3 && strcmp(tr_safetensors_meta(f, "format"), "pt") == 0 &&
              strcmp(tr_safetensors_meta(f, "trainer_kind"), "model") == 0,
          "model file: 3 tensors, format pt");
    tr_safetensors_close(f);
    snprintf(p2, sizeof p2, "%s/optimizer.safetensors", path);
    CHECK(tr_safetensors_open(&f, p2) == TR_OK, "open optimizer file");
    CHECK(tr_safetensors_count(f) == 4 && tr_safetensors_find(f, "fc.weight.exp_avg") &&
              tr_safetensors_find(f, "fc.bias.exp_avg_sq") && tr_safetensors_find(f, "fc.weight.exp_avg")->ndim == 2 &&
              tr_safetensors_find(f, "fc.weight.exp_avg")->shape[0] == 3 &&
              strcmp(tr_safetensors_meta(f, "steps"), "3") == 0,
          "optimizer file: per-parameter moments in the parameters' shapes, and steps");
    tr_safetensors_close(f);
    /* The files a model is rebuilt from (tr_params_add_file) go into the checkpoint as given. */
    static const char cfg[] = "{\"model_type\": \"bert\", \"sep_token_id\": 3}";
    const void *bytes;
    size_t nbytes;
    CHECK(tr_params_add_file(P, "config.json", "old", 3) == TR_OK &&
              tr_params_add_file(P, "config.json", cfg, sizeof cfg - 1) == TR_OK && tr_params_file_count(P) == 1 &&
              strcmp(tr_params_file(P, 0, &bytes, &nbytes), "config.json") == 0 && nbytes == sizeof cfg - 1,
          "a model file added, then replaced");
    CHECK(tr_params_add_file(P, "../config.json", "x", 1) == TR_ERR_INVALID && strstr(tr_error_msg(), "../config.json") &&
              tr_params_add_file(P, ".hidden", "x", 1) == TR_ERR_INVALID && tr_params_file(P, 1, &bytes, &nbytes) == NULL,
          "a model file's name with a folder refused: %s", tr_error_msg());
    snprintf(p2, sizeof p2, "%s/files", root);
    CHECK(tr_checkpoint_save(p2, "step-00000120", P, opt, &s) == TR_OK, "save with a file: %s", tr_error_msg());
    snprintf(p2, sizeof p2, "%s/files/step-00000120/config.json", root);
    char got[128] = "";
    FILE *cf = fopen(p2, "rb");
    size_t got_n = cf ? fread(got, 1, sizeof got - 1, cf) : 0;
    if (cf) fclose(cf);
    CHECK(got_n == sizeof cfg - 1 && memcmp(got, cfg, got_n) == 0, "the checkpoint holds config.json as given");
    snprintf(p2, sizeof p2, "%s/files/step-00000120", root);
    CHECK(tr_checkpoint_load(p2, P, opt, &s) == TR_OK && same(&good, P, opt, &s), "and loads as any other");
    snprintf(p2, sizeof p2, "%s/files", root);
    rm_rf(p2);

    /* s may be NULL, opt may be NULL. */
    scribble(P, opt, &s);
    CHECK(tr_checkpoint_load(path, P, NULL, NULL) == TR_OK, "weights-only load");
    CHECK(memcmp(good.data, tr_params_data(P), n * sizeof(float)) == 0, "weights restored");
    CHECK(tr_checkpoint_load(path, P, opt, &s) == TR_OK && same(&good, P, opt, &s), "full reload");

    /* Unaligned data from another writer is read with memcpy. */
    snprintf(p2, sizeof p2, "%s/unaligned", root);
    copy_ckpt(path, p2);
    char um[1100];
    snprintf(um, sizeof um, "%s/model.safetensors", p2);
    write_unaligned_model(um, P);
    scribble(P, opt, &s);
    CHECK(tr_checkpoint_load(p2, P, NULL, NULL) == TR_OK, "unaligned load: %s", tr_error_msg());
    CHECK(memcmp(good.data, tr_params_data(P), n * sizeof(float)) == 0 &&
              memcmp(good.buf, tr_params_buffers_data(P), good.nb * sizeof(float)) == 0,
          "unaligned data restored");
    rm_rf(p2);
    CHECK(tr_checkpoint_load(path, P, opt, &s) == TR_OK && same(&good, P, opt, &s), "reload");

    /* Refusals. */
    tr_params *P2 = make_params(5, 0, 1);
    expect_refused(
        "shape mismatch", path, P2, NULL,
        "model.safetensors: parameter 'fc.weight' has shape (3, 4) in the checkpoint, the model has (5, 4)",
        path);
    tr_params *P3 = make_params(3, 1, 1);
    expect_refused("missing tensor", path, P3, NULL,
                   "the model has 'fc3.bias' but the checkpoint does not (a checkpoint of another model?)",
                   path);
    tr_params *P4 = make_params(3, 0, 0);
    expect_refused("extra tensor", path, P4, NULL,
                   "the checkpoint has 'bn.running_mean' but the model does not", path);
    tr_optim *opt_long;
    CHECK(tr_optim_create(&opt_long, &oc, n + 16) == TR_OK, "optim");
    expect_refused("optimizer length", path, P, opt_long,
                   "checkpoint load: the optimizer covers 48 elements, the parameters 32", NULL);
    tr_optim_config sc = tr_optim_defaults(TR_OPTIM_SGD);
    sc.momentum = 0.9;
    tr_optim *sgd;
    CHECK(tr_optim_create(&sgd, &sc, n) == TR_OK, "sgd");
    expect_refused("optimizer kind", path, P, sgd, "4 state tensors in the checkpoint, the optimizer has 2 (1 per parameter",
                   NULL);

    snprintf(p2, sizeof p2, "%s/truncated", root);
    copy_ckpt(path, p2);
    char mf[1100];
    snprintf(mf, sizeof mf, "%s/model.safetensors", p2);
    struct stat sb;
    stat(mf, &sb);
    CHECK(truncate(mf, sb.st_size - 10) == 0, "truncate");
    expect_refused("truncated model", p2, P, opt, mf, "truncated");
    rm_rf(p2);

    snprintf(p2, sizeof p2, "%s/garbage", root);
    copy_ckpt(path, p2);
    snprintf(mf, sizeof mf, "%s/state.json", p2);
    FILE *g = fopen(mf, "w");
    fputs("{\"epoch\": 2, \"step\": ", g);
    fclose(g);
    expect_refused("garbage state.json", p2, P, opt, mf, "not valid JSON");
    g = fopen(mf, "w");
    fputs("{\"epoch\": 2, \"step\": 5, \"batch_in_epoch\": 0, \"seed\": \"12x\", \"config_hash\": \"\", "
          "\"model\": \"m\"}",
          g);
    fclose(g);
    expect_refused("bad seed", p2, P, opt, mf, "'seed'");
    rm_rf(p2);

    /* Saves that fail: nothing overwritten, nothing left behind, the good checkpoint intact. */
    tr_train_state s2 = state_at(999);
    for (int64_t i = 0; i < tr_tensor_numel(tr_params_get(P, 0)); i++)
        ((float *)tr_params_get(P, 0)->data)[i] += 1.0f;
    tr_status st = tr_checkpoint_save(dir, "step-00000120", P, opt, &s2);
    CHECK(st == TR_ERR_INVALID && strstr(tr_error_msg(), "exists already") && strstr(tr_error_msg(), path),
          "existing name refused: %s", tr_error_msg());
    printf("existing name: %s\n", tr_error_msg());
    snprintf(p2, sizeof p2, "%s/afile", root);
    g = fopen(p2, "w");
    fclose(g);
    snprintf(mf, sizeof mf, "%s/afile/ckpt", root);
    st = tr_checkpoint_save(mf, "step-1", P, opt, &s2);
    CHECK(st == TR_ERR_IO && strstr(tr_error_msg(), mf), "unwritable dir: %d %s", st, tr_error_msg());
    printf("unwritable dir: %s\n", tr_error_msg());
    unlink(p2);
    snprintf(s2.model, sizeof s2.model, "\xff\xfe"); /* not UTF-8: fails after model.safetensors is written */
    st = tr_checkpoint_save(dir, "step-00000999", P, opt, &s2);
    CHECK(st != TR_OK && strstr(tr_error_msg(), "step-00000999"), "mid-save failure: %s", tr_error_msg());
    printf("mid-save failure: %s\n", tr_error_msg());
    snprintf(p2, sizeof p2, "%s/step-00000999", dir);
    CHECK(!exists(p2), "failed save left no checkpoint");
    snprintf(p2, sizeof p2, "%s/step-00000999.tmp-%ld", dir, (long)getpid());
    CHECK(!exists(p2), "failed save removed its temp dir");
    CHECK(tr_checkpoint_save(dir, "a/b", P, opt, &s) == TR_ERR_INVALID, "name with a slash refused");
    CHECK(tr_checkpoint_load(path, P, opt, &s) == TR_OK && same(&good, P, opt, &s),
          "good checkpoint still loads");

    /* latest: highest step, not name order; incomplete and temp dirs ignored. */
    char out[512];
    CHECK(tr_checkpoint_save(dir, "b-step7", P, opt, &(tr_train_state){.step = 7}) == TR_OK, "save 7");
    CHECK(tr_checkpoint_save(dir, "c-step5", P, opt, &(tr_train_state){.step = 5}) == TR_OK, "save 5");
    CHECK(tr_checkpoint_latest(dir, out, sizeof out) == TR_OK && strcmp(out, path) == 0,
          "latest is step 120: %s", out);
    snprintf(p2, sizeof p2, "%s/zz-incomplete", dir);
    mkdir(p2, 0755);
    snprintf(mf, sizeof mf, "%s/state.json", p2);
    g = fopen(mf, "w");
    fputs(
        "{\"epoch\":0,\"step\":5000,\"batch_in_epoch\":0,\"seed\":\"1\",\"config_hash\":\"\",\"model\":\"\"}",
        g);
    fclose(g);
    pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0); /* a dead pid: its temp dir is stale */
    char stale[512], live[512];
    snprintf(stale, sizeof stale, "%s/step-00009000.tmp-%ld", dir, (long)child);
    snprintf(live, sizeof live, "%s/step-00009001.tmp-%ld", dir, (long)getppid());
    snprintf(mf, sizeof mf, "%s/step-00000120", dir);
    copy_ckpt(mf, stale);
    copy_ckpt(mf, live);
    CHECK(tr_checkpoint_latest(dir, out, sizeof out) == TR_OK && strcmp(out, path) == 0,
          "latest ignores incomplete and temp dirs: %s", out);
    CHECK(tr_checkpoint_save(dir, "a-step120", P, opt, &(tr_train_state){.step = 120}) == TR_OK, "save tie");
    CHECK(tr_checkpoint_latest(dir, out, sizeof out) == TR_OK && strcmp(out, path) == 0,
          "tie broken by name order (later name): %s", out);
    char small[8];
    CHECK(tr_checkpoint_latest(dir, small, sizeof small) == TR_ERR_INVALID, "short buffer refused");

    /* prune: keep the newest 2 by step (step-00000120, a-step120), drop b-step7 and c-step5 and
     * the stale temp dir; keep the incomplete dir and a live process's temp dir. */
    CHECK(tr_checkpoint_prune(dir, 0) == TR_ERR_INVALID, "keep_last 0 refused");
    CHECK(tr_checkpoint_prune(dir, 2) == TR_OK, "prune: %s", tr_error_msg());
    const char *kept[] = {"step-00000120", "a-step120", "zz-incomplete"};
    const char *gone[] = {"b-step7", "c-step5"};
    for (int i = 0; i < 3; i++) {
        snprintf(p2, sizeof p2, "%s/%s", dir, kept[i]);
        CHECK(exists(p2), "prune kept %s", kept[i]);
    }
    for (int i = 0; i < 2; i++) {
        snprintf(p2, sizeof p2, "%s/%s", dir, gone[i]);
        CHECK(!exists(p2), "prune removed %s", gone[i]);
    }
    CHECK(!exists(stale), "prune removed the stale temp dir");
    CHECK(exists(live), "prune kept a live process's temp dir");
    CHECK(tr_checkpoint_latest(dir, out, sizeof out) == TR_OK && strcmp(out, path) == 0,
          "latest after prune");
    CHECK(tr_checkpoint_load(out, P, opt, &s) == TR_OK && same(&good, P, opt, &s), "latest loads exactly");
    CHECK(tr_checkpoint_prune(dir, 1) == TR_OK, "prune to 1");
    snprintf(p2, sizeof p2, "%s/a-step120", dir);
    CHECK(!exists(p2) && exists(path), "prune to 1 keeps the later name of the step-120 tie");

    /* A weights file (consolidate's) loads as a checkpoint's weights: no optimizer, a zeroed
     * state; a `best` link and RUN/best name the checkpoint it points at, which latest and
     * prune leave alone. */
    char wf[512], link[512];
    snprintf(wf, sizeof wf, "%s/w.safetensors", root);
    CHECK(tr_checkpoint_consolidate(path, wf) == TR_OK, "consolidate: %s", tr_error_msg());
    tr_train_state ws;
    snapshot before = take(P, opt, &s);
    CHECK(tr_checkpoint_load(wf, P, opt, &ws) == TR_ERR_INVALID && strstr(tr_error_msg(), "holds no optimizer state"),
          "a weights file with an optimizer refused: %s", tr_error_msg());
    CHECK(same(&before, P, NULL, &s), "a refused weights file changes nothing");
    scribble(P, opt, &ws);
    CHECK(tr_checkpoint_load(wf, P, NULL, &ws) == TR_OK, "weights file: %s", tr_error_msg());
    CHECK(memcmp(before.data, tr_params_data(P), before.n * sizeof(float)) == 0 &&
              memcmp(before.buf, tr_params_buffers_data(P), before.nb * sizeof(float)) == 0 && ws.step == 0 &&
              ws.model[0] == '\0',
          "a weights file gives the checkpoint's weights and a zeroed state");
    CHECK(tr_checkpoint_find(wf, out, sizeof out) == TR_OK && strcmp(out, wf) == 0, "find: a weights file is itself");
    drop(&before);
    snprintf(link, sizeof link, "%s/best", dir);
    CHECK(symlink("step-00000120", link) == 0, "symlink");
    CHECK(tr_checkpoint_find(link, out, sizeof out) == TR_OK && strcmp(out, path) == 0, "find best: %s", out);
    snprintf(p2, sizeof p2, "%s/runs/q/0/best", root);
    CHECK(tr_checkpoint_find(p2, out, sizeof out) == TR_OK && strcmp(out, path) == 0, "find RUN/best: %s", out);
    CHECK(tr_checkpoint_prune(dir, 1) == TR_OK && exists(link) && tr_checkpoint_latest(dir, out, sizeof out) == TR_OK &&
              strcmp(out, path) == 0, "prune and latest leave the link alone");
    unlink(link);
    CHECK(symlink("step-00000999", link) == 0, "symlink");
    CHECK(tr_checkpoint_find(link, out, sizeof out) == TR_ERR_NOT_FOUND && strstr(tr_error_msg(), "which is not there"),
          "a dangling best is named: %s", tr_error_msg());
    unlink(link);
    unlink(wf);

    /* latest with nothing to find. */
    snprintf(p2, sizeof p2, "%s/empty", root);
    mkdir(p2, 0755);
    CHECK(tr_checkpoint_latest(p2, out, sizeof out) == TR_ERR_NOT_FOUND, "empty dir: not found");
    rmdir(p2);
    snprintf(p2, sizeof p2, "%s/missing", root);
    CHECK(tr_checkpoint_latest(p2, out, sizeof out) == TR_ERR_NOT_FOUND, "missing dir: not found");

    drop(&good);
    tr_optim_destroy(opt);
    tr_optim_destroy(opt_long);
    tr_optim_destroy(sgd);
    tr_params_destroy(P);
    tr_params_destroy(P2);
    tr_params_destroy(P3);
    tr_params_destroy(P4);
    rm_rf(live);
    snprintf(p2, sizeof p2, "%s/zz-incomplete", dir);
    rm_rf(p2);
    CHECK(rmdir(path) != 0, "a checkpoint dir is not empty");
    rm_rf(path);
    const char *up[] = {"runs/q/0/checkpoints", "runs/q/0", "runs/q", "runs"};
    for (int i = 0; i < 4; i++) {
        snprintf(p2, sizeof p2, "%s/%s", root, up[i]);
        CHECK(rmdir(p2) == 0, "rmdir %s: nothing else left", p2);
    }
    CHECK(rmdir(root) == 0, "nothing left in %s", root);
    return test_finish();
}
