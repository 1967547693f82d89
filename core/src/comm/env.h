/* Private: which launcher's variables tr_comm_env_detect reads here (see env.c). */
#ifndef TRAINER_COMM_ENV_H
#define TRAINER_COMM_ENV_H

#include <stddef.h>

#include "trainer/comm.h"

/* The launcher that started this process, decided here alone (every user asks these
 * functions): "trainer launch", "torchrun", "mpirun", "srun" (or "a PMIx launcher" or "a PMI
 * launcher", which tr_comm_env_detect refuses); NULL when none did. */
const char *tr_comm_env_launcher(void);
/* 1 when that launcher gives the ranks a pseudo-terminal and gathers their output into lines
 * (mpirun, srun, PMIx and PMI launchers): no progress bar there, whatever isatty says. 0
 * under trainer launch, torchrun (they pass the terminal through) or none. */
int tr_comm_env_gathers_output(void);
/* The variable that holds its world size ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE",
 * "SLURM_NTASKS"), for messages; NULL without a launcher. */
const char *tr_comm_env_size_var(void);
/* The job's hosts as the launcher reports them, for messages, into buf: "2 hosts (node[1-2],
 * SLURM_STEP_NODELIST)", "2 hosts (OMPI_MCA_orte_num_nodes)", "2 nodes (GROUP_WORLD_SIZE)",
 * or "several hosts" when it does not say how many; then "; N rank(s) on this one, NAME"
 * (gethostname). env: the detected job. */
void tr_comm_env_hosts(const tr_comm_env *env, char *buf, size_t size);

#endif
