/* Private: which launcher's variables tr_comm_env_detect reads here (see env.c). */
#ifndef TRAINER_COMM_ENV_H
#define TRAINER_COMM_ENV_H

/* "trainer launch", "torchrun", "mpirun", "srun" (or "a PMIx launcher", which
 * tr_comm_env_detect refuses without a world size); NULL when none started this process. */
const char *tr_comm_env_launcher(void);
/* The variable that holds its world size ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE",
 * "SLURM_NTASKS"), for messages; NULL without a launcher. */
const char *tr_comm_env_size_var(void);

#endif
