/* `trainer plan`. */
#ifndef TRAINER_CLI_PLAN_CMD_H
#define TRAINER_CLI_PLAN_CMD_H

/* argv holds the arguments after "plan". Returns the exit status. */
int trainer_plan_cmd(int argc, char **argv);

#endif
