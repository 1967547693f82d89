/* `trainer export`. */
#ifndef TRAINER_CLI_EXPORT_CMD_H
#define TRAINER_CLI_EXPORT_CMD_H

/* argv holds the arguments after the command name. Returns the exit status. */
int trainer_export_cmd(int argc, char **argv);

#endif
