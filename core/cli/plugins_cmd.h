/* `trainer plugins` and the plugin search path shared by the commands. */
#ifndef TRAINER_CLI_PLUGINS_CMD_H
#define TRAINER_CLI_PLUGINS_CMD_H

#include "trainer/plugin.h"

/* The build tree's and the install prefix's plugin folders (NULL-terminated). */
const char *const *trainer_default_plugin_dirs(void);
/* Adds the plugins of TRAINER_PLUGIN_PATH, the build tree and the install prefix, in order. */
tr_status trainer_scan_plugins(tr_registry *reg);
/* argv holds the arguments after "plugins". Returns the exit status. */
int trainer_plugins_cmd(int argc, char **argv);

#endif
