/* `trainer checkpoint`: tools for checkpoint directories. */
#ifndef TRAINER_CLI_CHECKPOINT_CMD_H
#define TRAINER_CLI_CHECKPOINT_CMD_H

/* argv holds the arguments after "checkpoint". Returns the exit status. */
int trainer_checkpoint_cmd(int argc, char **argv);

#endif
