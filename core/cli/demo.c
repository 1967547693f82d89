/* `trainer demo`: the core's own end-to-end check — an MLP learns a synthetic, seeded
 * classification task with AdamW, using only libtrainer (no plugins, no config). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "demo.h"
#include "trainer/trainer.h"

enum { D = 32, K = 8, H = 128, N_TRAIN = 8192, N_VAL = 2048, B = 128 };

/* Sample i: class i % K; features = class centre + noise, all from the counter-based RNG. */
static void make_data(float *x, int32_t *y, int n, uint64_t seed, uint64_t first,
                      const float *centres) {
    for (int i = 0; i < n; i++) {
        uint64_t id = first + (uint64_t)i;
        int c = (int)(tr_rng_u32(seed, TR_RNG_STREAM_DATA, 2 * id) % K);
        y[i] = c;
        tr_rng_fill_normal(x + (size_t)i * D, D, seed, TR_RNG_STREAM_DATA + 1, id * D, 0, 1.0f);
        for (int d = 0; d < D; d++) x[(size_t)i * D + d] += centres[c * D + d];
    }
}

int trainer_demo(int argc, char **argv) {
    int epochs = 5;
    uint64_t seed = 1;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "--epochs=", 9) == 0) epochs = atoi(argv[i] + 9);
        else if (strncmp(argv[i], "--seed=", 7) == 0) seed = strtoull(argv[i] + 7, NULL, 10);
        else {
            fprintf(stderr, "trainer demo: unknown argument '%s' (use --epochs=N, --seed=N)\n", argv[i]);
            return 2;
        }
    }
    if (epochs < 1 || epochs > 1000) {
        fprintf(stderr, "trainer demo: --epochs must be 1..1000\n");
        return 2;
    }
    tr_set_num_threads(0);
    int rc = 1;
    float *centres = malloc(sizeof(float) * K * D);
    float *xt = malloc(sizeof(float) * N_TRAIN * D), *xv = malloc(sizeof(float) * N_VAL * D);
    int32_t *yt = malloc(sizeof(int32_t) * N_TRAIN), *yv = malloc(sizeof(int32_t) * N_VAL);
    tr_rng_fill_normal(centres, K * D, seed, TR_RNG_STREAM_DATA + 2, 0, 0, 0.5f);
    make_data(xt, yt, N_TRAIN, seed, 0, centres);
    make_data(xv, yv, N_VAL, seed, N_TRAIN, centres);

    tr_params *P = NULL;
    tr_graph *g = NULL;
    tr_optim *opt = NULL;
    int w1, b1, w2, b2, w3, b3;
    tr_status st;
    TR_CHECK_GOTO(tr_params_create(&P), fail);
    TR_CHECK_GOTO(tr_params_add(P, "fc1.weight", 2, (int64_t[]){H, D}, TR_INIT_KAIMING_UNIFORM, 0, &w1), fail);
    TR_CHECK_GOTO(tr_params_add(P, "fc1.bias", 1, (int64_t[]){H}, TR_INIT_FAN_IN_UNIFORM, D, &b1), fail);
    TR_CHECK_GOTO(tr_params_add(P, "fc2.weight", 2, (int64_t[]){H, H}, TR_INIT_KAIMING_UNIFORM, 0, &w2), fail);
    TR_CHECK_GOTO(tr_params_add(P, "fc2.bias", 1, (int64_t[]){H}, TR_INIT_FAN_IN_UNIFORM, H, &b2), fail);
    TR_CHECK_GOTO(tr_params_add(P, "fc3.weight", 2, (int64_t[]){K, H}, TR_INIT_KAIMING_UNIFORM, 0, &w3), fail);
    TR_CHECK_GOTO(tr_params_add(P, "fc3.bias", 1, (int64_t[]){K}, TR_INIT_FAN_IN_UNIFORM, H, &b3), fail);
    TR_CHECK_GOTO(tr_params_finalize(P, seed), fail);
    TR_CHECK_GOTO(tr_graph_create(&g, 8 << 20), fail);
    tr_graph_set_params(g, P);
    tr_optim_config oc = tr_optim_defaults(TR_OPTIM_ADAMW);
    oc.lr = 2e-3;
    TR_CHECK_GOTO(tr_optim_create(&opt, &oc, tr_params_numel(P)), fail);
    tr_sched_config sc = {.kind = TR_SCHED_COSINE, .warmup_steps = 20,
                          .total_steps = (int64_t)epochs * (N_TRAIN / B) - 20};

    printf("trainer demo: MLP %d-%d-%d-%d, %zu parameters, %d train / %d validation samples, "
           "batch %d, AdamW, %d threads\n",
           D, H, H, K, tr_params_trainable(P), N_TRAIN, N_VAL, B, tr_get_num_threads());
    int64_t step = 0;
    double t0 = tr_now();
    double acc = 0;
    for (int ep = 0; ep < epochs; ep++) {
        double loss_sum = 0;
        int nb = N_TRAIN / B;
        for (int bi = 0; bi < nb; bi++) {
            /* Batches in an epoch-dependent order: a permutation of batch indices by an LCG. */
            int b = (int)(((uint64_t)bi * 37 + (uint64_t)ep * 11) % (uint64_t)nb);
            tr_graph_reset(g);
            tr_graph_set_training(g, 1);
            tr_tensor *x = tr_graph_input(g, TR_F32, 2, (int64_t[]){B, D});
            tr_tensor *y = tr_graph_input(g, TR_I32, 1, (int64_t[]){B});
            if (!x || !y) { st = tr_graph_status(g); goto fail; }
            memcpy(x->data, xt + (size_t)b * B * D, sizeof(float) * B * D);
            memcpy(y->data, yt + (size_t)b * B, sizeof(int32_t) * B);
            tr_tensor *h = tr_relu(g, tr_linear(g, x, tr_params_get(P, w1), tr_params_get(P, b1)));
            h = tr_relu(g, tr_linear(g, h, tr_params_get(P, w2), tr_params_get(P, b2)));
            tr_tensor *logits = tr_linear(g, h, tr_params_get(P, w3), tr_params_get(P, b3));
            tr_tensor *loss = tr_cross_entropy(g, logits, y, B, -1, 0.0);
            tr_params_zero_grad(P);
            TR_CHECK_GOTO(tr_backward(g, loss, NULL), fail);
            loss_sum += ((float *)loss->data)[0];
            TR_CHECK_GOTO(tr_optim_step(opt, tr_params_data(P), tr_params_grad(P), tr_params_numel(P),
                                        tr_sched_lr(&sc, oc.lr, step)), fail);
            step++;
        }
        /* Validation in inference mode. */
        int correct = 0;
        tr_graph_set_training(g, 0);
        tr_graph_set_grad_enabled(g, 0);
        for (int b = 0; b < N_VAL / B; b++) {
            tr_graph_reset(g);
            tr_tensor *x = tr_graph_input(g, TR_F32, 2, (int64_t[]){B, D});
            if (!x) { st = tr_graph_status(g); goto fail; }
            memcpy(x->data, xv + (size_t)b * B * D, sizeof(float) * B * D);
            tr_tensor *h = tr_relu(g, tr_linear(g, x, tr_params_get(P, w1), tr_params_get(P, b1)));
            h = tr_relu(g, tr_linear(g, h, tr_params_get(P, w2), tr_params_get(P, b2)));
            tr_tensor *logits = tr_linear(g, h, tr_params_get(P, w3), tr_params_get(P, b3));
            if (!logits) { st = tr_graph_status(g); goto fail; }
            for (int i = 0; i < B; i++) {
                const float *l = (const float *)logits->data + i * K;
                int best = 0;
                for (int c = 1; c < K; c++)
                    if (l[c] > l[best]) best = c;
                correct += best == yv[b * B + i];
            }
        }
        tr_graph_set_grad_enabled(g, 1);
        acc = (double)correct / (N_VAL / B * B);
        double dt = tr_now() - t0;
        printf("epoch %d/%d  train loss %.4f  val acc %.2f%%  %.0f samples/s\n", ep + 1, epochs,
               loss_sum / nb, 100 * acc, (double)(ep + 1) * nb * B / dt);
    }
    printf("final validation accuracy: %.2f%% (chance %.2f%%)\n", 100 * acc, 100.0 / K);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "trainer demo: %s\n", tr_error_msg());
done:
    tr_optim_destroy(opt);
    tr_graph_destroy(g);
    tr_params_destroy(P);
    free(centres); free(xt); free(xv); free(yt); free(yv);
    (void)st;
    return rc;
}
