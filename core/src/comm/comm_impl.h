/* Inside the core's comm: what comm.c and open.c share. */
#ifndef TR_COMM_IMPL_H
#define TR_COMM_IMPL_H

#include "trainer/comm_backend.h"

/* p's comm backend table, copied and zero-extended (an older plugin's shorter table); an error
 * naming the file when it is too short to have create, destroy and run. */
tr_status comm_backend_ops(const tr_plugin *p, tr_comm_backend_ops *ops);

#endif
