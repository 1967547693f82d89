/* `trainer generate`. */
#ifndef TRAINER_CLI_GENERATE_CMD_H
#define TRAINER_CLI_GENERATE_CMD_H

/* argv holds the arguments after the command name. Returns the exit status. */
int trainer_generate_cmd(int argc, char **argv);

#endif
