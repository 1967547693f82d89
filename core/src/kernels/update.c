/* One optimizer update by the config's kind: the kernel table's optim_update entry
 * (trainer/kernels.h), and the dispatch tr_optim's steps go through (optim/optim.c). */
#include "kernels/update.h"

void optim_coef_of(const tr_optim_config *cfg, int64_t steps, double lr, optim_coef *k) {
    if (cfg->kind == TR_OPTIM_SGD)
        optim_sgd_coef(cfg, steps, lr, k);
    else
        optim_adam_coef(cfg, steps, lr, k);
}

void optim_apply(const tr_optim_config *cfg, const optim_coef *k, float *param, const float *grad,
                 float *const *state, size_t n) {
    if (cfg->kind == TR_OPTIM_SGD)
        optim_sgd_apply(cfg, k, param, grad, state ? state[0] : NULL, n);
    else
        optim_adam_apply(k, param, grad, state[0], state[1], n);
}

void optim_update(const tr_optim_config *cfg, int64_t steps, float *param, const float *grad,
                  float *const *state, size_t n, double lr) {
    optim_coef k;
    optim_coef_of(cfg, steps, lr, &k);
    optim_apply(cfg, &k, param, grad, state, n);
}
