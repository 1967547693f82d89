/* `trainer launch`. */
#ifndef TRAINER_CLI_LAUNCH_CMD_H
#define TRAINER_CLI_LAUNCH_CMD_H

/* argv holds the arguments after "launch". Returns the exit status. */
int trainer_launch_cmd(int argc, char **argv);

#endif
