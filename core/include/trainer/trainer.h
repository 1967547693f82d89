/* The whole public SDK in one include.
 *
 *   #include <trainer/trainer.h>
 *   tr_init_runtime(0);                         // threads: OMP/BLAS from the environment
 *   printf("trainer %s\n", tr_version());
 */
#ifndef TRAINER_TRAINER_H
#define TRAINER_TRAINER_H

#include "trainer/graph.h"
#include "trainer/log.h"
#include "trainer/memory.h"
#include "trainer/model.h"
#include "trainer/ops.h"
#include "trainer/optim.h"
#include "trainer/params.h"
#include "trainer/plugin.h"
#include "trainer/profile.h"
#include "trainer/rng.h"
#include "trainer/runtime.h"
#include "trainer/solo.h"
#include "trainer/status.h"
#include "trainer/tensor.h"

#endif
