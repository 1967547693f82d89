/* `trainer generate`: text from a language model (the config's model, e.g. the transformer in
 * mode lm) and a checkpoint's weights, continuing a prompt one token at a time. Each new token
 * is a full forward of the context in eval mode through the config's strategy, on one device
 * (trainer.devices=1 is implied: cpu, or single-gpu where auto finds a GPU); there is no KV
 * cache. The context is the last data seq_len tokens (the dataset's sample length, the length
 * the model was trained on: its positions beyond it, if any, never learned anything). The
 * dataset is opened for its sample spec only. Tokens: bytes, or the config's tokenizer
 * (data.params.tokenizer), gen_text.h; the pick: token_sampler.h. */
#include <stdlib.h>
#include <string.h>

#include "gen_text.h"
#include "job.h"
#include "token_sampler.h"
#include "run/run_api.h"
#include "trainer/io.h"
#include "trainer/runtime.h"

static const char *task_name(tr_task t) {
    return t == TR_TASK_LM ? "lm" : t == TR_TASK_CLASSIFY ? "classify" : "regress";
}

/* A model that gives next-token logits: the data's task is lm, and a model with a `mode`
 * option (the transformer's lm, classify, pairs) is in mode lm. */
static tr_status check_language_model(const job *j) {
    const char *model = j->model_p->desc->name, *mode = tr_options_string(j->model_opts, "mode");
    if (mode && strcmp(mode, "lm") != 0)
        return tr_error_set(TR_ERR_INVALID, "model %s (mode %s) is not a language model: generate continues "
                                            "text with a next-token model (model.params.mode lm)", model, mode);
    if (j->spec.task != TR_TASK_LM)
        return tr_error_set(TR_ERR_INVALID, "model %s on data %s (task %s) is not a language model: generate "
                                            "continues text with a next-token model (the transformer in mode lm on "
                                            "language-model data)", model, j->data_p->desc->name, task_name(j->spec.task));
    return TR_OK;
}

/* The text codec: the config's tokenizer, else bytes, which need a vocabulary of 256. */
static tr_status open_text(job *j, const tr_generate_options *o, gen_text *t) {
    const char *path = NULL;
    TR_CHECK(tr_cfg_get_string(j->root, "data.params.tokenizer", NULL, &path, 0));
    if (path && *path) {
        char full[2048];
        tr_path_resolve(full, sizeof full, j->cfg_dir, path);
        return gen_text_open(t, full, o->emit, o->user);
    }
    if (j->spec.n_classes != 256)
        return tr_error_set(TR_ERR_INVALID, "the config names no tokenizer (data.params.tokenizer), so the prompt "
                                            "is read as bytes, which needs a byte-level model (a vocabulary of 256, as the "
                                            "text dataset's mode lm gives); model %s has a vocabulary of %lld",
                            j->model_p->desc->name, (long long)j->spec.n_classes);
    return gen_text_open(t, NULL, o->emit, o->user);
}

static tr_status check_prompt(const job *j, const gen_text *t) {
    if (t->n == 0)
        return tr_error_set(TR_ERR_INVALID, "the prompt is empty%s: the model needs at least one token to go on "
                                            "from", t->tok ? " (and the tokenizer adds no start token)" : "");
    for (size_t i = 0; i < t->n; i++)
        if (t->ids[i] < 0 || t->ids[i] >= j->spec.n_classes)
            return tr_error_set(TR_ERR_INVALID, "the prompt's token %zu has id %d, outside the model's vocabulary "
                                                "of %lld (data.params.tokenizer is not the model's tokenizer?)",
                                i, t->ids[i], (long long)j->spec.n_classes);
    return TR_OK;
}

/* The logits (V) of the token after the last `len` ids of the text. */
static tr_status next_logits(job *j, const gen_text *t, const float **logits) {
    int64_t W = j->spec.x_shape[0], V = j->spec.n_classes;
    int64_t len = (int64_t)t->n < W ? (int64_t)t->n : W;
    tr_host_batch hb = {.x = t->ids + (int64_t)t->n - len, .size = 1, .global_size = 1, .x_len = len};
    tr_model_out mo;
    TR_CHECK(j->sops->forward(j->strat, &hb, 0, &mo));
    if (!mo.logits || tr_tensor_numel(mo.logits) != len * V)
        return tr_error_set(TR_ERR_INVALID, "model %s gave %lld logits for %lld tokens, expected %lld x %lld "
                                            "(one row of the vocabulary per position)", j->model_p->desc->name,
                            mo.logits ? (long long)tr_tensor_numel(mo.logits) : 0LL, (long long)len, (long long)len,
                            (long long)V);
    *logits = (const float *)mo.logits->data + (len - 1) * V;
    return TR_OK;
}

static tr_status generate_job(job *j, const char *config_path, const char *const *overrides, int n_overrides,
                              const char *const *plugin_dirs, const char *checkpoint, const tr_generate_options *o,
                              gen_text *t, token_sampler *smp, tr_generate_result *res) {
    memset(res, 0, sizeof *res);
    token_sampling ts = {.temperature = o->temperature, .top_k = o->top_k, .top_p = o->top_p, .seed = o->seed};
    TR_CHECK(token_sampling_check(&ts));
    if (o->max_new_tokens < 0)
        return tr_error_set(TR_ERR_INVALID, "max_new_tokens %lld: expected an integer >= 0",
                            (long long)o->max_new_tokens);
    if (!checkpoint || !*checkpoint)
        return tr_error_set(TR_ERR_INVALID, "no checkpoint: give the weights to generate with (a run folder, a "
                                            "checkpoint folder, best, or a .safetensors file)");
    /* one device: the config's trainer.devices gives way, a command-line override does not */
    const char **ov = malloc((size_t)(n_overrides + 1) * sizeof *ov);
    if (!ov) return tr_error_set(TR_ERR_NOMEM, "out of memory");
    ov[0] = "trainer.devices=1";
    for (int i = 0; i < n_overrides; i++) ov[i + 1] = overrides[i];
    tr_status st = job_plan(j, config_path, ov, n_overrides + 1, plugin_dirs);
    free(ov);
    TR_CHECK(st);
    int ranks = job_world(j, NULL) > job_processes(j) ? job_world(j, NULL) : job_processes(j);
    if (ranks > 1 || j->s.devices > 1)
        return tr_error_set(TR_ERR_INVALID, "generate runs in one process on one device, and strategy %s asks for %lld "
                                            "%s: leave trainer.devices to generate (it implies 1), or use trainer.strategy "
                                            "cpu (or single-gpu)", j->strat_p->desc->name,
                            ranks > 1 ? (long long)ranks : (long long)j->s.devices, ranks > 1 ? "ranks" : "devices");
    TR_CHECK(job_resolve_checkpoint(j, checkpoint, res->checkpoint, sizeof res->checkpoint));
    snprintf(j->ckpt_path, sizeof j->ckpt_path, "%s", res->checkpoint);
    TR_CHECK(job_open_model(j));
    TR_CHECK(check_language_model(j));
    TR_CHECK(open_text(j, o, t));
    TR_CHECK(job_open_strategy(j));
    tr_train_state state;
    TR_CHECK(job_load_checkpoint(j, res->checkpoint, 0, &state));
    if (!o->has_seed) ts.seed = (uint64_t)j->s.seed;
    TR_CHECK(token_sampler_init(smp, &ts, j->spec.n_classes));
    TR_CHECK(gen_text_prompt(t, o->prompt ? o->prompt : "", o->prompt ? o->prompt_len : 0));
    TR_CHECK(check_prompt(j, t));
    if (o->emit && o->prompt_len) o->emit(o->user, o->prompt, o->prompt_len);
    res->prompt_tokens = (int64_t)t->n;
    if (t->eos >= 0) snprintf(res->eos_token, sizeof res->eos_token, "%s", t->eos_token);
    res->context = j->spec.x_shape[0];
    snprintf(res->description, sizeof res->description, "%s", j->info.description);
    double t0 = tr_now();
    while (res->new_tokens < o->max_new_tokens) {
        const float *logits = NULL;
        int32_t id;
        TR_CHECK(next_logits(j, t, &logits));
        TR_CHECK(token_sampler_next(smp, logits, (uint64_t)res->new_tokens, &id));
        if (id == t->eos) {
            res->stopped_at_eos = 1;
            break;
        }
        TR_CHECK(gen_text_push(t, id));
        res->new_tokens++;
    }
    TR_CHECK(gen_text_finish(t));
    res->seconds = tr_now() - t0;
    return TR_OK;
}

tr_status tr_run_generate(const char *config_path, const char *const *overrides, int n_overrides,
                          const char *const *plugin_dirs, const char *checkpoint, const tr_generate_options *opt,
                          tr_generate_result *out) {
    job j;
    gen_text t;
    token_sampler smp;
    memset(&j, 0, sizeof j);
    memset(&t, 0, sizeof t);
    memset(&smp, 0, sizeof smp);
    tr_status st = generate_job(&j, config_path, overrides, n_overrides, plugin_dirs, checkpoint, opt, &t, &smp, out);
    token_sampler_free(&smp);
    gen_text_close(&t);
    job_close(&j);
    return st;
}
