/* Unit tests of sharded's units (tr_grad_sync_units): consecutive whole parameters, at most
 * TR_GRAD_MAX_UNITS however many parameters and however small unit_mb, each unit within the
 * size it was grouped at; the cases that made 140 and ~255 units before the size doubled. */
#include <stdlib.h>

#include "check.h"
#include "trainer/trainer.h"

/* Checks the grouping of len[0..np) into units: contiguous, numbered from 0 in order, at
 * most TR_GRAD_MAX_UNITS; returns the count and the largest unit (floats). */
static int check_units(const size_t *len, int np, double unit_mb, size_t *biggest) {
    int *of = malloc((size_t)np * sizeof *of);
    int n = tr_grad_sync_units(len, np, unit_mb, of);
    CHECK(n >= 1 && n <= TR_GRAD_MAX_UNITS, "%d parameters at %g MiB: %d units", np, unit_mb, n);
    CHECK(of[0] == 0 && of[np - 1] == n - 1, "units numbered 0..%d, got %d..%d", n - 1, of[0], of[np - 1]);
    size_t cur = 0;
    *biggest = 0;
    for (int p = 0; p < np; p++) {
        if (p > 0) CHECK(of[p] == of[p - 1] || of[p] == of[p - 1] + 1, "parameter %d: unit %d after %d", p, of[p], of[p - 1]);
        if (p > 0 && of[p] != of[p - 1]) cur = 0;
        cur += len[p];
        if (cur > *biggest) *biggest = cur;
    }
    free(of);
    return n;
}

int main(void) {
    enum { NP = 600 };
    static size_t len[NP];
    size_t big;
    /* An mlp of 70 hidden layers of 16 padded to 32 floats: weights 256, biases 32. At the
     * smallest unit_mb (262 floats) each parameter was a unit alone: 140. */
    for (int p = 0; p < 140; p++) len[p] = p % 2 ? 32 : 256;
    int n = check_units(len, 140, 0.001, &big);
    CHECK(n <= TR_GRAD_MAX_UNITS && big >= 288, "deep mlp: %d units, the largest %zu floats", n, big);
    /* The worst case for greedy grouping: big, small, big, ... with each neighbouring pair just
     * over the 1/127 minimum: close to 2 x 127 units before. */
    for (int p = 0; p < 510; p++) len[p] = p % 2 ? 1 : 1000;
    n = check_units(len, 510, 0.001, &big);
    CHECK(n > 64, "alternating sizes: %d units (the size doubled once at most, not more)", n);
    /* Many equal parameters: fits at the 1/127 minimum without doubling (two per unit). */
    for (int p = 0; p < 256; p++) len[p] = 1024;
    n = check_units(len, 256, 0.001, &big);
    CHECK(n == 128 && big == 2048, "256 equal parameters: %d units of up to %zu floats, want 128 of 2048", n, big);
    /* Large unit_mb: one unit; a parameter larger than the size is a unit alone. */
    n = check_units(len, NP > 256 ? 256 : NP, 4096, &big);
    CHECK(n == 1 && big == 256 * 1024, "unit_mb 4096: %d units", n);
    size_t mixed[5] = {100000, 10, 10, 300000, 10};
    int of[5];
    n = tr_grad_sync_units(mixed, 5, 0.5, of); /* 131072 floats */
    CHECK(n == 3 && of[0] == 0 && of[2] == 0 && of[3] == 1 && of[4] == 2, "mixed sizes: %d units (%d %d %d %d %d)", n,
          of[0], of[1], of[2], of[3], of[4]);
    return test_finish();
}
