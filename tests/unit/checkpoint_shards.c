/* Sharded checkpoints through the core API: three "ranks" write uneven pieces; a full model,
 * another split (two ranks) and a consolidated file read them back bitwise; a missing piece,
 * an overlap and another optimizer kind are refused without changing anything. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "trainer/checkpoint.h"
#include "trainer/memory.h"
#include "trainer/optim.h"
#include "trainer/params.h"
#include "trainer/safetensors.h"

static tr_params *make(uint64_t seed) {
    tr_params *P;
    tr_params_create(&P);
    tr_params_add(P, "fc.weight", 2, (int64_t[]){5, 4}, TR_INIT_UNIFORM, 1.0, NULL);
    tr_params_add(P, "fc.bias", 1, (int64_t[]){5}, TR_INIT_UNIFORM, 1.0, NULL);
    tr_params_add_buffer(P, "bn.running_mean", 1, (int64_t[]){3}, TR_INIT_UNIFORM, 1.0, NULL);
    CHECK(tr_params_finalize(P, seed) == TR_OK, "finalize");
    return P;
}

static tr_optim *adam(tr_params *P, int steps) {
    tr_optim_config oc = tr_optim_defaults(TR_OPTIM_ADAMW);
    tr_optim *opt;
    CHECK(tr_optim_create(&opt, &oc, tr_params_numel(P)) == TR_OK, "optim");
    for (int s = 0; s < steps; s++) {
        for (int k = 0; k < tr_params_count(P); k++) {
            size_t off = tr_params_offset(P, k), n = (size_t)tr_tensor_numel(tr_params_get(P, k));
            for (size_t i = 0; i < n; i++) tr_params_grad(P)[off + i] = 0.1f * (float)((i * 3 + (size_t)s) % 7) - 0.3f;
        }
        tr_optim_step(opt, tr_params_data(P), tr_params_grad(P), tr_params_numel(P), 1e-2);
    }
    return opt;
}

/* Piece of parameter p, elements [a, b), pointing into P and opt. */
static tr_ckpt_piece piece(tr_params *P, tr_optim *opt, int p, int64_t a, int64_t b) {
    size_t off = tr_params_offset(P, p) + (size_t)a;
    tr_ckpt_piece pc = {.param = p, .start = a, .count = b - a, .data = tr_params_data(P) + off};
    for (int k = 0; opt && k < tr_optim_state_count(opt); k++) pc.state[k] = tr_optim_state(opt, k) + off;
    return pc;
}

/* Writes a 3-rank sharded checkpoint of P/opt; rank r writes pieces[r] (n[r] of them). */
static void save3(const char *dir, const char *name, tr_params *P, tr_optim *opt, tr_ckpt_piece pieces[3][2],
                  const int n[3]) {
    char tmp[1200];
    tr_train_state s = {.epoch = 1, .step = 7, .seed = 3};
    snprintf(s.model, sizeof s.model, "mlp");
    CHECK(tr_checkpoint_begin(dir, name, 42, tmp, sizeof tmp) == TR_OK, "begin: %s", tr_error_msg());
    for (int r = 0; r < 3; r++)
        CHECK(tr_checkpoint_write_shard(tmp, r, 3, P, opt, pieces[r], n[r]) == TR_OK, "shard %d: %s", r, tr_error_msg());
    CHECK(tr_checkpoint_commit(dir, name, tmp, 3, P, opt, &s) == TR_OK, "commit: %s", tr_error_msg());
}

static int same_floats(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

int main(void) {
    char root[] = "/tmp/trainer-ckshard-XXXXXX";
    CHECK(mkdtemp(root) != NULL, "mkdtemp");
    tr_params *P = make(1);
    tr_optim *opt = adam(P, 2);
    size_t n = tr_params_numel(P);
    CHECK(tr_params_add_file(P, "config.json", "{}", 2) == TR_OK, "a model file");
    /* Uneven pieces: weight 20 = 7 + 7 + 6, bias 5 = 2 + 2 + 1. */
    tr_ckpt_piece pcs[3][2] = {{piece(P, opt, 0, 0, 7), piece(P, opt, 1, 0, 2)},
                               {piece(P, opt, 0, 7, 14), piece(P, opt, 1, 2, 4)},
                               {piece(P, opt, 0, 14, 20), piece(P, opt, 1, 4, 5)}};
    save3(root, "good", P, opt, pcs, (int[]){2, 2, 2});
    char good[1100];
    snprintf(good, sizeof good, "%s/good", root);
    char cfg[1200];
    struct stat sb;
    snprintf(cfg, sizeof cfg, "%s/config.json", good);
    CHECK(stat(cfg, &sb) == 0 && sb.st_size == 2, "the model file is in the sharded checkpoint (rank 0 commits it)");

    /* A full model and optimizer from it: bitwise, and the step count. */
    tr_params *Q = make(99);
    tr_optim *qopt = adam(Q, 0);
    tr_train_state s;
    CHECK(tr_checkpoint_load(good, Q, qopt, &s) == TR_OK, "full load: %s", tr_error_msg());
    CHECK(same_floats(tr_params_data(P), tr_params_data(Q), n), "parameters equal");
    CHECK(same_floats(tr_params_buffers_data(P), tr_params_buffers_data(Q), 3), "buffers equal");
    for (int k = 0; k < 2; k++) CHECK(same_floats(tr_optim_state(opt, k), tr_optim_state(qopt, k), n), "state %d equal", k);
    CHECK(tr_optim_steps(qopt) == 2 && s.step == 7, "steps %lld, train step %lld", (long long)tr_optim_steps(qopt),
          (long long)s.step);

    /* Another split (two ranks' pieces) into a fresh model. */
    tr_params *R = make(98);
    tr_optim *ropt = adam(R, 0);
    tr_ckpt_piece two[4] = {piece(R, ropt, 0, 0, 10), piece(R, ropt, 1, 0, 3), piece(R, ropt, 0, 10, 20),
                            piece(R, ropt, 1, 3, 5)};
    CHECK(tr_checkpoint_load_pieces(good, R, ropt, two, 4, NULL) == TR_OK, "load as 2 ranks: %s", tr_error_msg());
    CHECK(same_floats(tr_params_data(P), tr_params_data(R), n), "two-rank split equal");

    /* One file of the weights. */
    char out[1200];
    snprintf(out, sizeof out, "%s/full.safetensors", root);
    CHECK(tr_checkpoint_consolidate(good, out) == TR_OK, "consolidate: %s", tr_error_msg());
    tr_safetensors *f;
    CHECK(tr_safetensors_open(&f, out) == TR_OK, "open consolidated");
    const tr_st_entry *w = tr_safetensors_find(f, "fc.weight");
    CHECK(w && w->ndim == 2 && w->shape[0] == 5 && same_floats(w->data, tr_params_get(P, 0)->data, 20),
          "consolidated fc.weight");
    CHECK(tr_safetensors_find(f, "bn.running_mean") && tr_safetensors_count(f) == 3, "consolidated: 3 tensors");
    tr_safetensors_close(f);

    /* Refusals leave the target unchanged. */
    tr_params *T = make(97);
    tr_optim *topt = adam(T, 0);
    float before[64];
    memcpy(before, tr_params_data(T), n * sizeof(float));
    pcs[1][1] = pcs[1][0]; /* rank 1 writes only its weight piece: bias [2, 4) is missing */
    save3(root, "hole", P, opt, pcs, (int[]){2, 1, 2});
    char path[1100];
    snprintf(path, sizeof path, "%s/hole", root);
    CHECK(tr_checkpoint_load(path, T, topt, NULL) != TR_OK && strstr(tr_error_msg(), "elements [0, 5) of 'fc.bias'") &&
              strstr(tr_error_msg(), "not all in the checkpoint"),
          "missing piece refused: %s", tr_error_msg());
    CHECK(same_floats(before, tr_params_data(T), n), "nothing changed");
    tr_ckpt_piece over[3][2] = {{piece(P, opt, 0, 0, 7), piece(P, opt, 1, 0, 5)},
                                {piece(P, opt, 0, 7, 20)},
                                {piece(P, opt, 1, 4, 5)}}; /* bias element 4 twice */
    save3(root, "overlap", P, opt, over, (int[]){2, 1, 1});
    snprintf(path, sizeof path, "%s/overlap", root);
    CHECK(tr_checkpoint_load(path, T, NULL, NULL) != TR_OK && strstr(tr_error_msg(), "in more than one piece"),
          "overlap refused: %s", tr_error_msg());
    tr_optim_config sc = tr_optim_defaults(TR_OPTIM_SGD);
    sc.momentum = 0.9;
    tr_optim *sgd;
    CHECK(tr_optim_create(&sgd, &sc, n) == TR_OK, "sgd");
    CHECK(tr_checkpoint_load(good, T, sgd, NULL) != TR_OK && strstr(tr_error_msg(), "2 optimizer states in the checkpoint, the optimizer has 1"),
          "another optimizer kind refused: %s", tr_error_msg());
    CHECK(same_floats(before, tr_params_data(T), n), "nothing changed");

    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    CHECK(system(cmd) == 0, "cleanup");
    tr_optim_destroy(opt);
    tr_optim_destroy(qopt);
    tr_optim_destroy(ropt);
    tr_optim_destroy(topt);
    tr_optim_destroy(sgd);
    tr_params_destroy(P);
    tr_params_destroy(Q);
    tr_params_destroy(R);
    tr_params_destroy(T);
    return test_finish();
}
