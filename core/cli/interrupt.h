/* Ctrl-C and SIGTERM for `trainer run`: stop at the next step with a checkpoint. */
#ifndef TRAINER_CLI_INTERRUPT_H
#define TRAINER_CLI_INTERRUPT_H

/* Installs the SIGINT and SIGTERM handlers: the first asks the run to stop at its next step
 * boundary and save there (tr_run_interrupt); a second stops the process at once, except in
 * a rank that trainer's launcher started, whose repeats are the launcher's forwarding of
 * the same Ctrl-C (the launcher itself kills the ranks on a second one). */
void trainer_interrupt_install(void);
/* The first signal received (0: none): `trainer run` then exits with 128 + it, as shells
 * expect of a process a signal stopped. */
int trainer_interrupt_signal(void);

#endif
