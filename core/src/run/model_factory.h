/* Private: the core's side of the model factory (trainer/replica.h has the public one). */
#ifndef TR_RUN_MODEL_FACTORY_H
#define TR_RUN_MODEL_FACTORY_H

#include "trainer/replica.h"

/* quiet 1: the model's info lines while a replica is made are dropped for every replica (a
 * rank other than 0 of the job: rank 0's first replica says them); 0: kept for the first. */
void model_factory_set_quiet(tr_model_factory *f, int quiet);
/* trainer.activation_checkpointing for every replica made after (tr_graph_set_checkpointing:
 * 0 off, N every N-th block), and what it is. */
void model_factory_set_checkpointing(tr_model_factory *f, int every);
int model_factory_checkpointing(const tr_model_factory *f);

#endif
