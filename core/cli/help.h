/* `trainer run|eval|predict|plan --help`: the command's usage and the config's sections. */
#ifndef TRAINER_CLI_HELP_H
#define TRAINER_CLI_HELP_H

/* Whether argv (a command's arguments) asks for help: -h or --help before any "--". */
int trainer_wants_help(int argc, char **argv);
/* Prints the help of a config-driven command (run, eval, predict, plan) to stdout; returns 0. */
int trainer_config_help(const char *command);

#endif
