/* `trainer embed`. */
#ifndef TRAINER_CLI_EMBED_CMD_H
#define TRAINER_CLI_EMBED_CMD_H

/* argv holds the arguments after the command name. Returns the exit status. */
int trainer_embed_cmd(int argc, char **argv);

#endif
