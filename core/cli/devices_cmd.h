/* `trainer devices`. */
#ifndef TRAINER_CLI_DEVICES_CMD_H
#define TRAINER_CLI_DEVICES_CMD_H

/* argv holds the arguments after "devices". Returns the exit status. */
int trainer_devices_cmd(int argc, char **argv);

#endif
