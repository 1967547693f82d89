/* `trainer plot --output FILE.png`: librsvg draws the SVG on a cairo image, which cairo
 * encodes as PNG (plot_png.h). */
#include "plot_png.h"

#include <stdio.h>

#ifdef TRAINER_HAVE_RSVG
#include <cairo.h>
#include <librsvg/rsvg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct png_bytes {
    unsigned char *p;
    size_t n, cap;
} png_bytes;

static cairo_status_t put(void *closure, const unsigned char *data, unsigned int length) {
    png_bytes *b = closure;
    if (b->n + length > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < b->n + length) cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p) return CAIRO_STATUS_NO_MEMORY;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, length);
    b->n += length;
    return CAIRO_STATUS_SUCCESS;
}

int plot_png_available(char *why, size_t cap) {
    (void)why;
    (void)cap;
    return 1;
}

int plot_png_render(const char *svg, size_t len, unsigned char **png, size_t *png_len, char *why, size_t cap) {
    *png = NULL;
    *png_len = 0;
    GError *err = NULL;
    RsvgHandle *h = rsvg_handle_new_from_data((const guint8 *)svg, len, &err);
    gdouble w = 0, ht = 0;
    if (!h || !rsvg_handle_get_intrinsic_size_in_pixels(h, &w, &ht) || w < 1 || ht < 1) {
        snprintf(why, cap, "librsvg cannot read the SVG: %s", err ? err->message : "it has no size in pixels");
        g_clear_error(&err);
        if (h) g_object_unref(h);
        return -1;
    }
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, (int)ceil(w), (int)ceil(ht));
    cairo_t *cr = cairo_create(s);
    RsvgRectangle viewport = {0, 0, w, ht};
    int ok = rsvg_handle_render_document(h, cr, &viewport, &err);
    cairo_destroy(cr);
    png_bytes b = {0};
    cairo_status_t cs = CAIRO_STATUS_SUCCESS;
    if (ok) cs = cairo_surface_write_to_png_stream(s, put, &b);
    if (!ok || cs != CAIRO_STATUS_SUCCESS) {
        snprintf(why, cap, "%s", !ok ? (err ? err->message : "librsvg cannot draw the SVG") : cairo_status_to_string(cs));
        free(b.p);
        b.p = NULL;
    }
    g_clear_error(&err);
    cairo_surface_destroy(s);
    g_object_unref(h);
    *png = b.p;
    *png_len = b.n;
    return b.p ? 0 : -1;
}

#else

int plot_png_available(char *why, size_t cap) {
    snprintf(why, cap, "this trainer was built without librsvg and cairo (Debian's librsvg2-dev), so it writes SVG "
                       "only: install librsvg2-dev and build again (tools/dev build does both), or write FILE.svg and "
                       "convert it (rsvg-convert -o FILE.png FILE.svg)");
    return 0;
}

int plot_png_render(const char *svg, size_t len, unsigned char **png, size_t *png_len, char *why, size_t cap) {
    (void)svg;
    (void)len;
    *png = NULL;
    *png_len = 0;
    plot_png_available(why, cap);
    return -1;
}

#endif
