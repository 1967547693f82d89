/* `trainer plot --output FILE.png`: the SVG rasterised by librsvg and cairo (Debian's
 * librsvg2-dev), linked when CMake found them (TRAINER_HAVE_RSVG); without them PNG is refused
 * with a message saying so. No program is run for it. */
#ifndef TRAINER_CLI_PLOT_PNG_H
#define TRAINER_CLI_PLOT_PNG_H

#include <stddef.h>

/* 1 when this build writes PNG; else 0 and why (what to install) in why[cap]. */
int plot_png_available(char *why, size_t cap);
/* The SVG document rendered at its own size into a PNG file's bytes (*png: malloc'ed, the
 * caller frees it). 0, or -1 with the reason in why[cap]. */
int plot_png_render(const char *svg, size_t len, unsigned char **png, size_t *png_len, char *why, size_t cap);

#endif
