/* `trainer eval` and `trainer predict`. */
#ifndef TRAINER_CLI_EVAL_CMD_H
#define TRAINER_CLI_EVAL_CMD_H

/* argv holds the arguments after the command name; predict is 1 for `predict`. Returns the
 * exit status. */
int trainer_eval_cmd(int argc, char **argv, int predict);

#endif
