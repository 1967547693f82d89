/* An optimizer's kind and hyper-parameters: what tr_optim_create takes (trainer/optim.h) and
 * what a device's optim_update kernel is given (trainer/kernels.h).
 *
 *   tr_optim_config oc = tr_optim_defaults(TR_OPTIM_ADAMW);   // trainer/optim.h
 *   oc.lr = 3e-4;
 *
 * Types only, below both headers that use them (docs/design.md "Layers"). */
#ifndef TRAINER_OPTIM_CONFIG_H
#define TRAINER_OPTIM_CONFIG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tr_optim_kind { TR_OPTIM_SGD = 0, TR_OPTIM_ADAM = 1, TR_OPTIM_ADAMW = 2 } tr_optim_kind;

typedef struct tr_optim_config {
    tr_optim_kind kind;
    double lr;
    double weight_decay;  /* SGD/Adam: L2 added to the gradient; AdamW: decoupled */
    double momentum;      /* SGD */
    double dampening;     /* SGD */
    int nesterov;         /* SGD */
    double beta1, beta2;  /* Adam, AdamW */
    double eps;           /* Adam, AdamW */
} tr_optim_config;

#ifdef __cplusplus
}
#endif
#endif
