/* `trainer demo`: the core's self-contained training demo. */
#ifndef TRAINER_CLI_DEMO_H
#define TRAINER_CLI_DEMO_H

/* argv holds the arguments after "demo". Returns the process exit status. */
int trainer_demo(int argc, char **argv);

#endif
