/* The per-region profile (trainer/profile.h): regions tile the attached time (their sum is
 * the wall time between attach and detach, each region at least the time spent in it), calls
 * count entries, the table is sorted largest first and written as text and JSON (a name with
 * a quote escaped); nothing is recorded when no profile is attached or on another thread;
 * distinct regions past the table's room count in one overflow region; and a graph with ops
 * on names a region per op forward and per node backward (with shapes: and its first two inputs'
 * shapes), with the gradient-ready hooks apart, and none with ops off. */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "trainer/trainer.h"

static void spin(double seconds) {
    double end = tr_now() + seconds;
    while (tr_now() < end) {
    }
}

/* A copy of region (phase, name), or one with calls -1 when there is none (the array
 * tr_profile_regions returns is only valid until the next call). */
static tr_profile_region region(tr_profile *p, const char *phase, const char *name) {
    int n;
    const tr_profile_region *r = tr_profile_regions(p, &n);
    for (int i = 0; i < n; i++)
        if (!strcmp(r[i].phase, phase) && !strcmp(r[i].name, name)) return r[i];
    return (tr_profile_region){.calls = -1};
}

static void *other_thread(void *arg) {
    (void)arg;
    tr_profile_enter("data", "from another thread"); /* no profile attached here */
    return (void *)(intptr_t)(tr_profile_current() == NULL);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

static void test_regions(void) {
    tr_profile *p;
    CHECK(tr_profile_create(&p) == TR_OK, "create");
    tr_profile_enter("data", "before attach"); /* nothing attached: nothing happens */
    CHECK(!tr_profile_ops(), "no ops without a profile");
    double t0 = tr_now();
    tr_profile_attach(p);
    CHECK(tr_profile_current() == p, "attached");
    tr_profile_enter("forward", "a");
    spin(0.003);
    tr_profile_enter("backward", "b");
    spin(0.001);
    tr_profile_enter("forward", "a");
    spin(0.002);
    char name[32];
    snprintf(name, sizeof name, "a"); /* the same text at another address */
    tr_profile_enter("forward", name);
    spin(0.0005);
    pthread_t th;
    void *ok = NULL;
    pthread_create(&th, NULL, other_thread, NULL);
    pthread_join(th, &ok);
    CHECK(ok != NULL, "another thread has no profile");
    tr_profile_attach(NULL);
    double wall = tr_now() - t0;
    CHECK(tr_profile_current() == NULL, "detached");
    int n;
    const tr_profile_region *r = tr_profile_regions(p, &n);
    CHECK(n == 2, "two regions, got %d", n);
    /* Regions hold wall time: on a loaded host a preemption inside b's 1 ms can make it the
     * larger, so the order is checked against the measured times, not assumed. */
    CHECK(n == 2 && r[0].seconds >= r[1].seconds, "largest first: %s %g, %s %g", n == 2 ? r[0].name : "",
          n == 2 ? r[0].seconds : 0, n == 2 ? r[1].name : "", n == 2 ? r[1].seconds : 0);
    tr_profile_region a = region(p, "forward", "a"), b = region(p, "backward", "b");
    CHECK(a.calls == 3 && a.seconds >= 0.0055, "a: 3 calls, >= 5.5 ms: %lld, %g", (long long)a.calls, a.seconds);
    CHECK(b.calls == 1 && b.seconds >= 0.001, "b: 1 call, >= 1 ms: %lld, %g", (long long)b.calls, b.seconds);
    double sum = tr_profile_seconds(p);
    CHECK(sum <= wall && sum > wall - 0.001, "the regions tile the attached time: %g of %g", sum, wall);
    CHECK(region(p, "data", "before attach").calls < 0 && region(p, "data", "from another thread").calls < 0,
          "nothing unattached");
    /* Entering after a detach records nothing more. */
    tr_profile_enter("forward", "a");
    CHECK(fabs(tr_profile_seconds(p) - sum) < 1e-12, "detached profile unchanged");

    char dir[] = "/tmp/trainer-profile-XXXXXX", txt[64], json[64];
    CHECK(mkdtemp(dir) != NULL, "temp dir");
    snprintf(txt, sizeof txt, "%s/p.txt", dir);
    snprintf(json, sizeof json, "%s/p.json", dir);
    CHECK(tr_profile_write(p, 2, txt, json) == TR_OK, "write: %s", tr_error_msg());
    const char *t = slurp(txt);
    CHECK(t && strstr(t, "over 2 steps") && strstr(t, "forward") && strstr(t, " a ") && strstr(t, "backward"),
          "text table: %s", t ? t : "(none)");
    t = slurp(json);
    CHECK(t && strstr(t, "\"steps\": 2") && strstr(t, "{\"phase\": \"forward\", \"name\": \"a\", \"calls\": 3, "),
          "json: %s", t ? t : "(none)");
    char line[512];
    tr_profile_summary(p, 2, line, sizeof line);
    CHECK(strstr(line, "over 2 steps") && strstr(line, a.seconds >= b.seconds ? "most: forward a" : "most: backward b"),
          "summary: %s", line);
    CHECK(tr_profile_write(p, 2, "/nonexistent-dir/p.txt", NULL) == TR_ERR_IO &&
              strstr(tr_error_msg(), "/nonexistent-dir/p.txt"),
          "an unwritable path is an error naming it: %s", tr_error_msg());
    unlink(txt);
    unlink(json);

    /* A quote in a name is escaped; regions past the room (its last slot is the overflow's)
     * share the overflow region. */
    static char names[TR_PROFILE_MAX_REGIONS + 40][16];
    tr_profile *q;
    tr_profile_create(&q);
    tr_profile_attach(q);
    tr_profile_enter("strategy", "say \"hi\"");
    for (int i = 0; i < TR_PROFILE_MAX_REGIONS + 40; i++) {
        snprintf(names[i], sizeof names[i], "r%d", i);
        tr_profile_enter("loop", names[i]);
    }
    tr_profile_attach(NULL);
    tr_profile_regions(q, &n);
    tr_profile_region more = region(q, "other", "(more regions)");
    CHECK(n == TR_PROFILE_MAX_REGIONS && more.calls == 1 + (TR_PROFILE_MAX_REGIONS + 40) - (TR_PROFILE_MAX_REGIONS - 1),
          "room for %d regions, the rest in one: %d, %lld", TR_PROFILE_MAX_REGIONS, n, (long long)more.calls);
    CHECK(tr_profile_write(q, 1, NULL, json) == TR_OK, "write json");
    t = slurp(json);
    CHECK(t && strstr(t, "\"say \\\"hi\\\"\""), "quote escaped");
    unlink(json);
    rmdir(dir);
    tr_profile_destroy(q);
    tr_profile_destroy(p);
}

/* Attaching the attached profile again changes nothing (its region goes on); detaching turns
 * ops off; one buffer reused for other text makes other regions; a name past the room is cut
 * at a UTF-8 character's boundary, and the same long name finds its region again. */
static void test_edges(void) {
    tr_profile *p;
    tr_profile_create(&p);
    double t0 = tr_now();
    tr_profile_attach(p);
    tr_profile_enter("loop", "x");
    spin(0.001);
    tr_profile_attach(p);
    spin(0.001);
    tr_profile_set_ops(TR_PROFILE_OPS);
    tr_profile_attach(NULL);
    double wall = tr_now() - t0;
    CHECK(tr_profile_ops() == TR_PROFILE_OPS_OFF, "detached: ops off");
    tr_profile_attach(p);
    CHECK(tr_profile_ops() == TR_PROFILE_OPS_OFF, "attached again: ops still off until set");
    tr_profile_attach(NULL);
    tr_profile_region x = region(p, "loop", "x");
    CHECK(x.calls == 1 && x.seconds >= 0.002 && x.seconds <= wall, "attach of the attached one goes on: %g", x.seconds);

    char buf[TR_PROFILE_NAME_MAX + 32];
    tr_profile_attach(p);
    snprintf(buf, sizeof buf, "one");
    tr_profile_enter("loop", buf);
    snprintf(buf, sizeof buf, "two");
    tr_profile_enter("loop", buf);
    /* 40 ASCII bytes, then 2-byte characters: the cut at 47 bytes would split one. */
    size_t k = 0;
    for (; k < 40; k++) buf[k] = 'a';
    for (int c = 0; c < 10; c++) buf[k++] = (char)0xC3, buf[k++] = (char)0xA9; /* U+00E9 */
    buf[k] = 0;
    tr_profile_enter("loop", buf);
    tr_profile_enter("loop", "one");
    tr_profile_enter("loop", buf);
    tr_profile_attach(NULL);
    CHECK(region(p, "loop", "one").calls == 2 && region(p, "loop", "two").calls == 1, "a reused buffer's texts apart");
    int n;
    const tr_profile_region *r = tr_profile_regions(p, &n);
    int found = 0;
    for (int i = 0; i < n; i++)
        if (!strncmp(r[i].name, "aaaa", 4)) {
            found++;
            size_t len = strlen(r[i].name);
            CHECK(len == 46 && (unsigned char)r[i].name[len - 2] == 0xC3 && (unsigned char)r[i].name[len - 1] == 0xA9 &&
                      r[i].calls == 2,
                  "cut whole: %zu bytes, %lld calls", len, (long long)r[i].calls);
        }
    CHECK(found == 1, "one region for the long name");
    tr_profile_destroy(p);
}

/* A step of linear -> relu -> cross-entropy with the graph's ops on, with shapes, and off. */
static int hook_calls;
static void hook(void *user, int p) {
    (void)user, (void)p;
    hook_calls++;
}

static void test_graph(void) {
    tr_params *P;
    int iw, ib;
    tr_params_create(&P);
    tr_params_add(P, "w", 2, (int64_t[]){3, 4}, TR_INIT_KAIMING_UNIFORM, 0, &iw);
    tr_params_add(P, "b", 1, (int64_t[]){3}, TR_INIT_FAN_IN_UNIFORM, 4, &ib);
    tr_params_finalize(P, 1);
    tr_graph *g;
    tr_graph_create(&g, 0);
    tr_graph_set_params(g, P);
    tr_graph_set_grad_hook(g, hook, NULL);
    tr_profile *p;
    tr_profile_create(&p);
    tr_profile_attach(p);
    const int levels[] = {TR_PROFILE_OPS, TR_PROFILE_OPS_SHAPES, TR_PROFILE_OPS_OFF};
    for (int k = 0; k < 3; k++) {
        tr_graph_reset(g);
        tr_profile_set_ops(levels[k]);
        CHECK(tr_profile_ops() == levels[k], "ops level %d", levels[k]);
        tr_profile_enter("forward", "(before the first op)");
        tr_tensor *x = tr_graph_input(g, TR_F32, 2, (int64_t[]){2, 4});
        tr_tensor *y = tr_graph_input(g, TR_I32, 1, (int64_t[]){2});
        for (int i = 0; i < 8; i++) ((float *)x->data)[i] = (float)i / 8 - 0.3f;
        ((int32_t *)y->data)[0] = 1, ((int32_t *)y->data)[1] = 2;
        tr_tensor *h = tr_relu(g, tr_linear(g, x, tr_params_get(P, iw), tr_params_get(P, ib)));
        tr_tensor *loss = tr_cross_entropy(g, h, y, 2, -1, 0.0f);
        CHECK(tr_backward(g, loss, NULL) == TR_OK, "backward: %s", tr_error_msg());
        tr_profile_set_ops(TR_PROFILE_OPS_OFF);
        tr_profile_enter("strategy", "optim_step");
    }
    tr_profile_set_ops(TR_PROFILE_OPS);
    tr_profile_attach(NULL);
    CHECK(tr_profile_ops() == TR_PROFILE_OPS_OFF, "no ops without a profile attached");
    tr_profile_set_ops(TR_PROFILE_OPS_OFF);
    const char *fwd[] = {"linear", "relu", "cross_entropy"}, *shaped[] = {"linear (2, 4) (3, 4)", "relu (2, 3)", "cross_entropy (2, 3)"};
    for (int i = 0; i < 3; i++) {
        tr_profile_region f = region(p, "forward", fwd[i]), b = region(p, "backward", fwd[i]);
        CHECK(f.calls == 1 && b.calls == 1, "%s: one region forward and one backward (ops on only)", fwd[i]);
        f = region(p, "forward", shaped[i]), b = region(p, "backward", shaped[i]);
        CHECK(f.calls == 1 && b.calls == 1, "%s: with shapes, one region each way", shaped[i]);
    }
    tr_profile_region hk = region(p, "backward", "(gradient-ready hooks)");
    tr_profile_region after = region(p, "strategy", "train_micro after backward");
    tr_profile_region before = region(p, "forward", "(before the first op)");
    tr_profile_region seed = region(p, "backward", "(seed gradient)");
    /* Per backward with ops on: a hook region as w's and b's last uses end (once each), and
     * one before the unused parameters' hooks. */
    CHECK(hook_calls == 6 && hk.calls == 6, "hooks in a region of their own: %d calls, region %lld", hook_calls,
          (long long)hk.calls);
    CHECK(seed.calls == 2 && after.calls == 2, "backward's seed and the strategy's region after it (ops on only)");
    CHECK(before.calls == 3, "the caller's regions count with ops off too");
    tr_profile_destroy(p);
    tr_graph_destroy(g);
    tr_params_destroy(P);
}

int main(void) {
    test_regions();
    test_edges();
    test_graph();
    return test_finish();
}
