/* Piecewise initialisation (tr_params_finalize_deferred, tr_params_init_range): any cut of the
 * flat buffer into runs, each written into memory of its own, gives tr_params_finalize's
 * values bit for bit for every init rule, a whole-tensor fill and a ranged fill; a ranged fill
 * is asked for the pieces only and hears once that no more are wanted; misuse is refused. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "trainer/trainer.h"

typedef struct source {
    size_t asked;  /* elements the ranged fill wrote */
    int done;      /* its "no more" calls */
    int after;     /* fills after that */
} source;

/* Element i of parameter p's "file": a value of its own. */
static float file_value(int p, size_t i) { return (float)p + 0.001f * (float)i; }

static tr_status fill_range(void *ctx, int index, float *data, size_t start, size_t count) {
    source *s = ctx;
    if (!data) {
        s->done++;
        return TR_OK;
    }
    if (s->done) s->after++;
    s->asked += count;
    for (size_t i = 0; i < count; i++) data[i] = file_value(index, start + i);
    return TR_OK;
}

static tr_status fill_whole(void *ctx, int index, float *data, size_t numel) {
    (void)ctx;
    for (size_t i = 0; i < numel; i++) data[i] = -file_value(index, i);
    return TR_OK;
}

/* Every init rule, a whole fill and a ranged fill (two parameters), aligned as `align`. */
static tr_params *model(size_t align, source *s) {
    tr_params *P;
    CHECK(tr_params_create(&P) == TR_OK, "create");
    if (align) tr_params_set_align(P, align);
    int ix[9];
    tr_params_add(P, "emb", 2, (int64_t[]){37, 9}, TR_INIT_NORMAL, 0.02, &ix[0]);
    tr_params_add(P, "w", 2, (int64_t[]){13, 11}, TR_INIT_KAIMING_UNIFORM, 0, &ix[1]);
    tr_params_add(P, "b", 1, (int64_t[]){13}, TR_INIT_FAN_IN_UNIFORM, 11, &ix[2]);
    tr_params_add(P, "u", 1, (int64_t[]){29}, TR_INIT_UNIFORM, 0.5, &ix[3]);
    tr_params_add(P, "ln.w", 1, (int64_t[]){7}, TR_INIT_ONES, 0, &ix[4]);
    tr_params_add(P, "ln.b", 1, (int64_t[]){7}, TR_INIT_ZEROS, 0, &ix[5]);
    tr_params_add(P, "pre.a", 2, (int64_t[]){19, 5}, TR_INIT_ZEROS, 0, &ix[6]);
    tr_params_add(P, "pre.b", 1, (int64_t[]){41}, TR_INIT_ZEROS, 0, &ix[7]);
    tr_params_add(P, "whole", 2, (int64_t[]){3, 23}, TR_INIT_ZEROS, 0, &ix[8]);
    tr_params_add_buffer(P, "bn.var", 1, (int64_t[]){6}, TR_INIT_ONES, 0, NULL);
    tr_params_set_fill(P, ix[8], fill_whole, NULL);
    tr_params_set_fill_range(P, ix[6], fill_range, s);
    tr_params_set_fill_range(P, ix[7], fill_range, s);
    return P;
}

static void test_cuts(size_t align) {
    source sref = {0}, s = {0};
    tr_params *R = model(align, &sref), *P = model(align, &s);
    CHECK(tr_params_finalize(R, 77) == TR_OK, "finalize: %s", tr_error_msg());
    CHECK(sref.done == 1 && sref.after == 0 && sref.asked == 19 * 5 + 41, "finalize: the ranged fill asked %zu, done %d",
          sref.asked, sref.done);
    CHECK(tr_params_finalize_deferred(P, 77) == TR_OK, "finalize_deferred");
    size_t n = tr_params_numel(P);
    CHECK(n == tr_params_numel(R), "same layout");
    CHECK(((float *)tr_params_buffer(P, 0)->data)[5] == 1.0f, "buffers initialised by finalize_deferred");
    /* Runs of random length (1 .. 40 elements, crossing parameters and gaps), each into its
     * own memory, together the whole buffer; then only a few runs of a second registry. */
    float *got = malloc(n * sizeof *got);
    srand(5 + (unsigned)align);
    for (size_t lo = 0; lo < n;) {
        size_t hi = lo + 1 + (size_t)(rand() % 40);
        if (hi > n) hi = n;
        float *piece = malloc((hi - lo) * sizeof *piece);
        memset(piece, 0x7f, (hi - lo) * sizeof *piece);
        CHECK(tr_params_init_range(P, lo, hi, piece) == TR_OK, "init_range [%zu, %zu): %s", lo, hi, tr_error_msg());
        memcpy(got + lo, piece, (hi - lo) * sizeof *piece);
        free(piece);
        lo = hi;
    }
    size_t bad = n;
    for (size_t i = 0; i < n && bad == n; i++)
        if (memcmp(&got[i], tr_params_data(R) + i, sizeof(float)) != 0) bad = i;
    CHECK(bad == n, "align %zu: the pieces give finalize's values bit for bit (first difference at %zu of %zu)", align,
          bad, n);
    CHECK(s.asked == 19 * 5 + 41 && s.done == 0, "the ranged fill was asked for each element once (%zu)", s.asked);
    CHECK(tr_params_init_range(P, 0, 1, NULL) == TR_ERR_INVALID && strstr(tr_error_msg(), "into a NULL buffer"),
          "init_range into NULL refused with its own message: %s", tr_error_msg());
    tr_params_init_done(P);
    tr_params_init_done(P);
    CHECK(s.done == 1, "one context, two parameters: told once that no more are wanted (%d)", s.done);
    CHECK(tr_params_init_range(P, 0, 1, got) == TR_ERR_INVALID && strstr(tr_error_msg(), "after tr_params_init_done"),
          "init_range after init_done refused: %s", tr_error_msg());
    CHECK(s.after == 0, "no fill after init_done");
    /* Only what is asked is computed: a run inside pre.b reads just that much of its "file". */
    source s2 = {0};
    tr_params *Q = model(align, &s2);
    tr_params_finalize_deferred(Q, 77);
    size_t off = tr_params_offset(Q, tr_params_find(Q, "pre.b"));
    float part[10];
    CHECK(tr_params_init_range(Q, off + 30, off + 40, part) == TR_OK && s2.asked == 10 &&
              part[0] == file_value(7, 30) && part[9] == file_value(7, 39),
          "a run of 10 elements reads 10 (%zu)", s2.asked);
    CHECK(tr_params_init_range(Q, 5, tr_params_numel(Q) + 1, got) == TR_ERR_INVALID &&
              strstr(tr_error_msg(), "outside the flat buffer"),
          "a run past the buffer refused: %s", tr_error_msg());
    CHECK(tr_params_finalize(Q, 77) == TR_ERR_INVALID, "finalize after finalize_deferred refused");
    tr_params_destroy(Q);
    CHECK(s2.done == 0, "a registry destroyed before init_done tells nothing (its owner releases)");
    free(got);
    tr_params_destroy(P);
    tr_params_destroy(R);
}

int main(void) {
    test_cuts(0);
    test_cuts(16 * 3);
    return test_finish();
}
