/* `trainer plot`. */
#ifndef TRAINER_CLI_PLOT_CMD_H
#define TRAINER_CLI_PLOT_CMD_H

/* argv holds the arguments after the command name. Returns the exit status. */
int trainer_plot_cmd(int argc, char **argv);

#endif
