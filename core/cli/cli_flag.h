/* Command-line options of the trainer subcommands. */
#ifndef TRAINER_CLI_FLAG_H
#define TRAINER_CLI_FLAG_H

/* "--name VALUE" or "--name=VALUE" at argv[*i]: 1 and *value set (*i advanced past VALUE),
 * 0 when argv[*i] is another argument, -1 when VALUE is missing. */
int cli_flag(int argc, char **argv, int *i, const char *name, const char **value);

#endif
