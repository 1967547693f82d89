/* Private: the optimizer object. Its update loops are the kernels layer's (kernels/update.h);
 * this folder holds the object, its checks and schedules, and calls them. */
#ifndef TRAINER_OPTIM_IMPL_H
#define TRAINER_OPTIM_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/update.h"
#include "trainer/optim.h"

struct tr_optim {
    tr_optim_config cfg;
    size_t n;                            /* elements of the slice this optimizer updates */
    int64_t steps;                       /* updates taken so far */
    int nstate;
    float *state[OPTIM_MAX_STATE];       /* (n) each, owned */
    struct tr_accel *accel;              /* tr_optim_place: updates run there, on dstate */
    float *dstate[OPTIM_MAX_STATE];      /* (n) each, device memory, owned */
    const char *names[OPTIM_MAX_STATE];  /* torch's state keys */
};

#endif
