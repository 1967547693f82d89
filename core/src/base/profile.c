/* The per-region wall-time profile of trainer/profile.h.
 *
 * A region is looked up among the last few pairs entered first (by address, then checking
 * the text: callers mostly pass string literals), then by text through the table. The table is
 * allocated whole at create, so entering never allocates and never fails. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/io_error.h"
#include "trainer/memory.h"
#include "trainer/profile.h"
#include "trainer/runtime.h"

#define RECENT 8 /* pointer pairs remembered for the lookup */

struct tr_profile {
    tr_profile_region r[TR_PROFILE_MAX_REGIONS];
    int n;
    int cur;                      /* the region the thread is in; -1 before the first enter */
    double since;                 /* when it entered it (tr_now) */
    int attached;
    struct {
        const char *phase, *name;
        int at;
    } recent[RECENT];
    unsigned next_recent;
    tr_profile_region sorted[TR_PROFILE_MAX_REGIONS];
};

static _Thread_local tr_profile *current;
static _Thread_local int ops_on;

/* Copies s into out (size bytes), cut at a character boundary of UTF-8 when it must be cut, so
 * that the JSON stays valid. */
static void copy_cut(char *out, size_t size, const char *s) {
    size_t n = strlen(s);
    if (n >= size) {
        n = size - 1;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--; /* s[n] would start the cut-off part */
    }
    memcpy(out, s, n);
    out[n] = 0;
}

static int same(const tr_profile_region *r, const char *phase, const char *name) {
    return !strcmp(r->phase, phase) && !strcmp(r->name, name);
}

/* The region of (phase_in, name_in), made when new: the pair as it is stored (cut to size),
 * looked up among the last pairs entered by address, then through the table. */
static int find(tr_profile *p, const char *phase_in, const char *name_in) {
    char phase[TR_PROFILE_PHASE_MAX], name[TR_PROFILE_NAME_MAX];
    copy_cut(phase, sizeof phase, phase_in);
    copy_cut(name, sizeof name, name_in);
    for (int i = 0; i < RECENT; i++) /* the text is checked too: a caller's buffer may be reused */
        if (p->recent[i].phase == phase_in && p->recent[i].name == name_in && same(&p->r[p->recent[i].at], phase, name))
            return p->recent[i].at;
    int at = -1;
    for (int i = 0; i < p->n && at < 0; i++)
        if (same(&p->r[i], phase, name)) at = i;
    if (at < 0) {
        if (p->n >= TR_PROFILE_MAX_REGIONS - 1) { /* the last slot is the overflow's */
            snprintf(phase, sizeof phase, "other");
            snprintf(name, sizeof name, "(more regions)");
            at = p->n;
            for (int i = 0; i < p->n; i++)
                if (same(&p->r[i], phase, name)) at = i;
        } else {
            at = p->n;
        }
        if (at == p->n) {
            memcpy(p->r[at].phase, phase, sizeof phase);
            memcpy(p->r[at].name, name, sizeof name);
            p->n++;
        }
    }
    p->recent[p->next_recent % RECENT].phase = phase_in;
    p->recent[p->next_recent % RECENT].name = name_in;
    p->recent[p->next_recent % RECENT].at = at;
    p->next_recent++;
    return at;
}

/* Ends the current region at `now`. */
static void close_region(tr_profile *p, double now) {
    if (!p->attached) return;
    if (p->cur >= 0) p->r[p->cur].seconds += now - p->since;
    p->since = now;
}

tr_status tr_profile_create(tr_profile **out) {
    *out = tr_calloc(1, sizeof **out);
    return *out ? TR_OK : tr_error_set(TR_ERR_NOMEM, "profile: out of memory");
}

void tr_profile_destroy(tr_profile *p) {
    if (!p) return;
    if (current == p) tr_profile_attach(NULL);
    tr_free(p);
}

void tr_profile_attach(tr_profile *p) {
    if (p && p == current) return; /* already: its region goes on */
    double now = tr_now();
    if (!p) ops_on = TR_PROFILE_OPS_OFF;
    if (current) {
        close_region(current, now);
        current->attached = 0;
    }
    current = p;
    if (!p) return;
    p->attached = 1;
    p->since = now;
    p->cur = -1;
}

tr_profile *tr_profile_current(void) { return current; }

void tr_profile_enter(const char *phase, const char *name) {
    tr_profile *p = current;
    if (!p) return;
    close_region(p, tr_now());
    p->cur = find(p, phase, name);
    p->r[p->cur].calls++;
}

void tr_profile_set_ops(int level) { ops_on = level; }
int tr_profile_ops(void) { return current ? ops_on : 0; }

static int by_seconds(const void *a, const void *b) {
    double x = ((const tr_profile_region *)a)->seconds, y = ((const tr_profile_region *)b)->seconds;
    return x < y ? 1 : x > y ? -1 : 0;
}

const tr_profile_region *tr_profile_regions(tr_profile *p, int *n_out) {
    if (p->attached && current == p) close_region(p, tr_now());
    int n = 0;
    for (int i = 0; i < p->n; i++)
        if (p->r[i].calls) p->sorted[n++] = p->r[i];
    qsort(p->sorted, (size_t)n, sizeof p->sorted[0], by_seconds);
    *n_out = n;
    return p->sorted;
}

double tr_profile_seconds(tr_profile *p) {
    int n;
    const tr_profile_region *r = tr_profile_regions(p, &n);
    double s = 0;
    for (int i = 0; i < n; i++) s += r[i].seconds;
    return s;
}

/* The phases in the order people read a step. */
static const char *const phases[] = {"data", "forward", "backward", "strategy", "loop", "other"};
#define N_PHASES (int)(sizeof phases / sizeof phases[0])

/* Seconds per phase; a phase not in the list counts as "other". */
static void phase_totals(const tr_profile_region *r, int n, double tot[N_PHASES]) {
    for (int k = 0; k < N_PHASES; k++) tot[k] = 0;
    for (int i = 0; i < n; i++) {
        int k = N_PHASES - 1;
        for (int q = 0; q < N_PHASES - 1; q++)
            if (!strcmp(r[i].phase, phases[q])) k = q;
        tot[k] += r[i].seconds;
    }
}

static double pct(double part, double whole) { return whole > 0 ? 100 * part / whole : 0; }

void tr_profile_summary(tr_profile *p, int64_t steps, char *out, size_t size) {
    int n;
    const tr_profile_region *r = tr_profile_regions(p, &n);
    double tot[N_PHASES], all = 0;
    phase_totals(r, n, tot);
    for (int k = 0; k < N_PHASES; k++) all += tot[k];
    size_t len = (size_t)snprintf(out, size, "%.3f ms a step over %lld steps:", steps > 0 ? 1e3 * all / (double)steps : 0,
                                  (long long)steps);
    for (int k = 0, first = 1; k < N_PHASES && len < size; k++)
        if (tot[k] > 0) {
            len += (size_t)snprintf(out + len, size - len, "%s %s %.1f%%", first ? "" : ",", phases[k], pct(tot[k], all));
            first = 0;
        }
    for (int i = 0; i < n && i < 3 && len < size; i++)
        len += (size_t)snprintf(out + len, size - len, "%s %s %s %.1f%%", i ? "," : "; most:", r[i].phase, r[i].name,
                                pct(r[i].seconds, all));
}

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

/* Closes f, turning a failed write or close into an error naming path. */
static tr_status finish(FILE *f, const char *path) {
    int bad = ferror(f), e = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    char why[256];
    return bad ? tr_error_set(TR_ERR_IO, "%s: cannot write the profile: %s", path, tr_io_reason(e, why, sizeof why)) : TR_OK;
}

static FILE *open_out(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) {
        char why[256];
        tr_error_set(TR_ERR_IO, "%s: cannot write the profile: %s", path, tr_io_reason(errno, why, sizeof why));
    }
    return f;
}

tr_status tr_profile_write(tr_profile *p, int64_t steps, const char *txt_path, const char *json_path) {
    int n;
    const tr_profile_region *r = tr_profile_regions(p, &n);
    double tot[N_PHASES], all = 0, per = steps > 0 ? 1e3 / (double)steps : 0;
    phase_totals(r, n, tot);
    for (int k = 0; k < N_PHASES; k++) all += tot[k];
    if (txt_path) {
        FILE *f = open_out(txt_path);
        if (!f) return TR_ERR_IO;
        fprintf(f, "# wall time of the training thread over %lld steps: %.3f s, %.3f ms a step\n", (long long)steps, all,
                all * per);
        fprintf(f, "# by phase:");
        for (int k = 0; k < N_PHASES; k++)
            if (tot[k] > 0) fprintf(f, " %s %.1f%% (%.3f ms)", phases[k], pct(tot[k], all), tot[k] * per);
        fprintf(f, "\n%-10s %-34s %10s %11s %11s %7s\n", "phase", "region", "calls", "seconds", "ms/step", "%");
        for (int i = 0; i < n; i++)
            fprintf(f, "%-10s %-34s %10lld %11.4f %11.4f %7.2f\n", r[i].phase, r[i].name, (long long)r[i].calls,
                    r[i].seconds, r[i].seconds * per, pct(r[i].seconds, all));
        TR_CHECK(finish(f, txt_path));
    }
    if (json_path) {
        FILE *f = open_out(json_path);
        if (!f) return TR_ERR_IO;
        fprintf(f, "{\"steps\": %lld, \"seconds\": %.9g, \"regions\": [", (long long)steps, all);
        for (int i = 0; i < n; i++) {
            fprintf(f, "%s\n  {\"phase\": ", i ? "," : "");
            json_string(f, r[i].phase);
            fprintf(f, ", \"name\": ");
            json_string(f, r[i].name);
            fprintf(f, ", \"calls\": %lld, \"seconds\": %.9g}", (long long)r[i].calls, r[i].seconds);
        }
        fprintf(f, "\n]}\n");
        TR_CHECK(finish(f, json_path));
    }
    return TR_OK;
}
