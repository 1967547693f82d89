/* `trainer tokenize`. */
#ifndef TRAINER_CLI_TOKENIZE_CMD_H
#define TRAINER_CLI_TOKENIZE_CMD_H

/* argv holds the arguments after "tokenize". Returns the exit status. */
int trainer_tokenize_cmd(int argc, char **argv);

#endif
