/* Private: a device plugin's name and file, for the messages of device/accel.c. The device
 * layer sees a tr_plugin by pointer only (its fields are the plugin layer's); these are
 * implemented beside tr_device_ops_of in plugin/devices.c, like it a call upward that no
 * include shows (docs/architecture.md, "Layers"). */
#ifndef TRAINER_DEVICE_BACKEND_NAME_H
#define TRAINER_DEVICE_BACKEND_NAME_H

#include "trainer/devices.h"

/* The plugin's name ("cuda") and the file it was loaded from. */
const char *device_backend_name(const tr_plugin *p);
const char *device_backend_path(const tr_plugin *p);

#endif
