/* Full training steps against PyTorch: an MLP, a CNN with batch-norm and a pre-LN transformer
 * block LM. One step's loss and every parameter gradient (and the batch-norm running
 * statistics) within 1e-5; the losses of 10 AdamW steps within 1e-4. Parameters are
 * registered from the reference file's init.* tensors, in order, under the same names. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "refio.h"
#include "trainer/trainer.h"

typedef struct model {
    const char *name;
    tr_params *P;
    ref_file *rf;
} model;

#define PRM(m, n) tr_params_get((m)->P, tr_params_find((m)->P, n))
#define BUF(m, n) tr_params_buffer((m)->P, tr_params_find_buffer((m)->P, n))

static tr_tensor *batch_tensor(tr_graph *g, model *m, int step, const char *what) {
    char key[64];
    snprintf(key, sizeof key, "batch%d.%s", step, what);
    return ref_to_graph(g, ref_need(m->rf, key), 0);
}

static tr_tensor *mlp_loss(tr_graph *g, model *m, int step) {
    tr_tensor *x = batch_tensor(g, m, step, "x"), *y = batch_tensor(g, m, step, "y");
    tr_tensor *h = tr_relu(g, tr_linear(g, x, PRM(m, "fc1.weight"), PRM(m, "fc1.bias")));
    h = tr_gelu(g, tr_linear(g, h, PRM(m, "fc2.weight"), PRM(m, "fc2.bias")), TR_GELU_EXACT);
    tr_tensor *logits = tr_linear(g, h, PRM(m, "fc3.weight"), PRM(m, "fc3.bias"));
    return tr_cross_entropy(g, logits, y, (double)x->shape[0], -100, 0.0);
}

static tr_tensor *cnn_loss(tr_graph *g, model *m, int step) {
    tr_tensor *x = batch_tensor(g, m, step, "x"), *y = batch_tensor(g, m, step, "y");
    tr_tensor *h = tr_conv2d(g, x, PRM(m, "conv1.weight"), NULL, 1, 1);
    h = tr_batch_norm(g, h, PRM(m, "bn1.weight"), PRM(m, "bn1.bias"), BUF(m, "bn1.running_mean"),
                      BUF(m, "bn1.running_var"), 0.1, 1e-5);
    h = tr_max_pool2d(g, tr_relu(g, h), 2, 2, 0);
    h = tr_conv2d(g, h, PRM(m, "conv2.weight"), NULL, 1, 0);
    h = tr_batch_norm(g, h, PRM(m, "bn2.weight"), PRM(m, "bn2.bias"), BUF(m, "bn2.running_mean"),
                      BUF(m, "bn2.running_var"), 0.1, 1e-5);
    h = tr_flatten(g, tr_max_pool2d(g, tr_relu(g, h), 2, 2, 0), 1);
    h = tr_relu(g, tr_linear(g, h, PRM(m, "fc1.weight"), PRM(m, "fc1.bias")));
    tr_tensor *logits = tr_linear(g, h, PRM(m, "fc2.weight"), PRM(m, "fc2.bias"));
    return tr_cross_entropy(g, logits, y, (double)x->shape[0], -100, 0.0);
}

static tr_tensor *transformer_loss(tr_graph *g, model *m, int step) {
    tr_tensor *ids = batch_tensor(g, m, step, "ids"), *y2 = batch_tensor(g, m, step, "y");
    int64_t B = ids->shape[0], T = ids->shape[1];
    int64_t C = PRM(m, "wte.weight")->shape[1];
    tr_tensor *y = tr_graph_input(g, TR_I32, 1, (int64_t[]){B * T});
    if (y) memcpy(y->data, y2->data, sizeof(int32_t) * (size_t)(B * T));
    tr_tensor *x = tr_add(g, tr_embedding(g, ids, PRM(m, "wte.weight")), PRM(m, "wpe"));
    tr_tensor *h = tr_layer_norm(g, x, PRM(m, "ln1.weight"), PRM(m, "ln1.bias"), 1e-5);
    tr_tensor *qkv = tr_linear(g, h, PRM(m, "attn.qkv.weight"), PRM(m, "attn.qkv.bias"));
    tr_tensor *q = tr_slice(g, qkv, 2, 0, C), *k = tr_slice(g, qkv, 2, C, C);
    tr_tensor *v = tr_slice(g, qkv, 2, 2 * C, C);
    tr_tensor *a = tr_attention(g, q, k, v, 4, 1);
    x = tr_add(g, x, tr_linear(g, a, PRM(m, "attn.proj.weight"), PRM(m, "attn.proj.bias")));
    h = tr_layer_norm(g, x, PRM(m, "ln2.weight"), PRM(m, "ln2.bias"), 1e-5);
    h = tr_gelu(g, tr_linear(g, h, PRM(m, "mlp.fc.weight"), PRM(m, "mlp.fc.bias")), TR_GELU_TANH);
    x = tr_add(g, x, tr_linear(g, h, PRM(m, "mlp.proj.weight"), PRM(m, "mlp.proj.bias")));
    x = tr_layer_norm(g, x, PRM(m, "lnf.weight"), PRM(m, "lnf.bias"), 1e-5);
    tr_tensor *logits = tr_linear(g, x, PRM(m, "head.weight"), NULL);
    return tr_cross_entropy(g, logits, y, (double)(B * T), -100, 0.0);
}

typedef tr_tensor *(*loss_fn)(tr_graph *g, model *m, int step);

/* Registers init.* as parameters and buf.* as buffers and loads their values. */
static int load_model(model *m) {
    if (tr_params_create(&m->P) != TR_OK) return 0;
    for (int i = 0; i < m->rf->n; i++) {
        const ref_tensor *r = &m->rf->t[i];
        if (strncmp(r->name, "init.", 5) == 0)
            CHECK(tr_params_add(m->P, r->name + 5, r->ndim, r->shape, TR_INIT_ZEROS, 0, NULL) == TR_OK,
                  "add %s: %s", r->name, tr_error_msg());
        else if (strncmp(r->name, "buf.", 4) == 0)
            CHECK(tr_params_add_buffer(m->P, r->name + 4, r->ndim, r->shape, TR_INIT_ZEROS, 0, NULL) == TR_OK,
                  "add %s: %s", r->name, tr_error_msg());
    }
    if (tr_params_finalize(m->P, 0) != TR_OK) return 0;
    for (int i = 0; i < m->rf->n; i++) {
        const ref_tensor *r = &m->rf->t[i];
        tr_tensor *t = NULL;
        if (strncmp(r->name, "init.", 5) == 0) t = PRM(m, r->name + 5);
        else if (strncmp(r->name, "buf.", 4) == 0) t = BUF(m, r->name + 4);
        if (t) memcpy(t->data, r->data, (size_t)r->numel * sizeof(float));
    }
    return 1;
}

static void run_model(const char *case_name, loss_fn fn) {
    model m = {.name = case_name, .rf = ref_open(case_name)};
    char label[192];
    if (!load_model(&m)) {
        test_fail_at(__FILE__, __LINE__, "%s: load failed: %s", case_name, tr_error_msg());
        return;
    }
    tr_graph *g;
    tr_graph_create(&g, 0);
    tr_graph_set_params(g, m.P);

    /* One step: loss, every gradient, running statistics. */
    tr_tensor *loss = fn(g, &m, 0);
    CHECK(loss != NULL, "%s: forward failed: %s", case_name, tr_error_msg());
    if (!loss) goto done;
    snprintf(label, sizeof label, "%s: loss", case_name);
    check_tensor(label, loss->data, ref_need(m.rf, "step0.loss")->data, 1, 1e-5);
    CHECK(tr_backward(g, loss, NULL) == TR_OK, "%s: backward: %s", case_name, tr_error_msg());
    for (int p = 0; p < tr_params_count(m.P); p++) {
        char key[160];
        snprintf(key, sizeof key, "step0.grad.%s", tr_params_name(m.P, p));
        snprintf(label, sizeof label, "%s: grad %s", case_name, tr_params_name(m.P, p));
        check_tensor(label, tr_params_get(m.P, p)->grad, ref_need(m.rf, key)->data,
                     tr_tensor_numel(tr_params_get(m.P, p)), 1e-5);
    }
    for (int b = 0; b < tr_params_buffer_count(m.P); b++) {
        char key[160];
        snprintf(key, sizeof key, "step0.buf.%s", tr_params_buffer_name(m.P, b));
        snprintf(label, sizeof label, "%s: %s", case_name, tr_params_buffer_name(m.P, b));
        check_tensor(label, tr_params_buffer(m.P, b)->data, ref_need(m.rf, key)->data,
                     tr_tensor_numel(tr_params_buffer(m.P, b)), 1e-5);
    }

    /* Ten AdamW steps from the initial state. The graph lets go of the old parameters
     * (reset) before they are destroyed. */
    tr_graph_reset(g);
    tr_params_destroy(m.P);
    if (!load_model(&m)) goto done;
    tr_graph_set_params(g, m.P);
    tr_optim_config oc = tr_optim_defaults(TR_OPTIM_ADAMW);
    oc.lr = 1e-2;
    oc.weight_decay = 0.01;
    tr_optim *opt;
    tr_optim_create(&opt, &oc, tr_params_numel(m.P));
    const ref_tensor *rl = ref_need(m.rf, "adamw.losses");
    float losses[16], ref_losses[16];
    for (int s = 0; s < rl->numel && s < 16; s++) {
        tr_graph_reset(g);
        tr_params_zero_grad(m.P);
        loss = fn(g, &m, s);
        if (!loss || tr_backward(g, loss, NULL) != TR_OK) {
            test_fail_at(__FILE__, __LINE__, "%s step %d: %s", case_name, s, tr_error_msg());
            break;
        }
        losses[s] = ((float *)loss->data)[0];
        if (getenv("TRAINER_TEST_VERBOSE")) printf("  step %d loss %.7f torch %.7f\n", s, losses[s], ((double *)rl->data)[s]);
        ref_losses[s] = (float)((double *)rl->data)[s];
        tr_optim_step(opt, tr_params_data(m.P), tr_params_grad(m.P), tr_params_numel(m.P), oc.lr);
    }
    snprintf(label, sizeof label, "%s: 10 AdamW losses", case_name);
    check_tensor(label, losses, ref_losses, rl->numel, 1e-4);
    printf("%s: loss %.5f -> %.5f (torch %.5f -> %.5f)\n", case_name, losses[0],
           losses[rl->numel - 1], ref_losses[0], ref_losses[rl->numel - 1]);
    CHECK(losses[rl->numel - 1] < losses[0], "%s: loss falls", case_name);
    tr_optim_destroy(opt);
done:
    tr_graph_destroy(g);
    tr_params_destroy(m.P);
    ref_close(m.rf);
}

int main(void) {
    tr_set_num_threads(1);
    run_model("model_mlp", mlp_loss);
    run_model("model_cnn", cnn_loss);
    run_model("model_transformer", transformer_loss);
    return test_finish();
}
