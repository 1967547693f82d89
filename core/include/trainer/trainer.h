/* The plugin SDK in one include: every installed header of <trainer/...>, bottom layer first
 * (docs/architecture.md, "Layers"):
 *   base        export, status, log, memory, io, rng, profile, half, runtime, team
 *   config      config
 *   kernels     optim_config
 *   tensor      tensor
 *   device      accel, kernels, device_backend, devices
 *   compute     ops, graph, params, optim
 *   plugin      plugin, model
 *   data        data, tokenizer
 *   comm        comm, comm_backend
 *   strategy    strategy, replica, rank, solo, grad_sync
 *   formats     safetensors, checkpoint
 * The application's entry points (`trainer run`, eval, predict, embed, export, generate, plan,
 * plot, launch) are not in the SDK: the trainer CLI declares them privately.
 *
 *   #include <trainer/trainer.h>
 *   tr_set_num_threads(0);                      // threads: OMP/BLAS from the environment
 *   printf("trainer %s\n", tr_version());
 *
 * The documents the headers cite as docs/NAME.md are installed with them, under
 * <prefix>/share/doc/trainer/ (docs/abi.md: the plugin ABI and what libtrainer exports). */
#ifndef TRAINER_TRAINER_H
#define TRAINER_TRAINER_H

#include "trainer/accel.h"
#include "trainer/checkpoint.h"
#include "trainer/comm.h"
#include "trainer/comm_backend.h"
#include "trainer/config.h"
#include "trainer/data.h"
#include "trainer/device_backend.h"
#include "trainer/devices.h"
#include "trainer/export.h"
#include "trainer/grad_sync.h"
#include "trainer/graph.h"
#include "trainer/half.h"
#include "trainer/io.h"
#include "trainer/kernels.h"
#include "trainer/log.h"
#include "trainer/memory.h"
#include "trainer/model.h"
#include "trainer/ops.h"
#include "trainer/optim.h"
#include "trainer/optim_config.h"
#include "trainer/params.h"
#include "trainer/plugin.h"
#include "trainer/profile.h"
#include "trainer/rank.h"
#include "trainer/replica.h"
#include "trainer/rng.h"
#include "trainer/runtime.h"
#include "trainer/safetensors.h"
#include "trainer/solo.h"
#include "trainer/status.h"
#include "trainer/strategy.h"
#include "trainer/team.h"
#include "trainer/tensor.h"
#include "trainer/tokenizer.h"

#endif
