/* `trainer run`. */
#ifndef TRAINER_CLI_RUN_CMD_H
#define TRAINER_CLI_RUN_CMD_H

/* argv holds the arguments after "run". Returns the exit status. */
int trainer_run_cmd(int argc, char **argv);

#endif
