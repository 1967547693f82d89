/* The next-token sampler of `trainer generate` (run/token_sampler.h) on logits whose softmax
 * is known: greedy is the argmax (the lowest id among ties), the temperature divides the
 * logits, top-k keeps exactly k tokens, top-p the fewest whose mass reaches p (after top-k,
 * renormalised, as Hugging Face's warpers run), ties ranked by id; draws follow the
 * distribution (a chi-square bound over 200,000 draws), the same seed gives the same tokens
 * and another seed others; bad options and logits are refused by name. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "run/token_sampler.h"

/* Logits log(p): their softmax is p (normalised). */
static void log_of(float *l, const double *p, int n) {
    for (int i = 0; i < n; i++) l[i] = (float)log(p[i]);
}

/* The sampler's distribution for these options, or NULL after a failed check. */
static const double *probs(token_sampler *t, token_sampling s, const float *l, int64_t V, int64_t *kept) {
    token_sampler_free(t);
    if (token_sampler_init(t, &s, V) != TR_OK || token_sampler_probs(t, l, kept) != TR_OK) {
        CHECK(0, "sampler: %s", tr_error_msg());
        return NULL;
    }
    return t->p;
}

static void check_dist(const char *what, const double *p, const double *want, int n, double tol) {
    if (!p) return;
    for (int i = 0; i < n; i++)
        CHECK(fabs(p[i] - want[i]) <= tol, "%s: p[%d] = %.12g, expected %.12g", what, i, p[i], want[i]);
}

static void test_greedy(token_sampler *t) {
    float l[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f, -INFINITY};
    int64_t kept = 0;
    const double *p = probs(t, (token_sampling){.temperature = 0, .top_k = 2, .top_p = 0.1}, l, 6, &kept);
    check_dist("greedy", p, (double[]){0, 1, 0, 0, 0, 0}, 6, 0);
    CHECK(kept == 1, "greedy keeps %lld tokens", (long long)kept);
    for (uint64_t i = 0; i < 20; i++) {
        int32_t id = -1;
        CHECK(token_sampler_next(t, l, i, &id) == TR_OK && id == 1, "greedy draw %llu: %d (the first maximum is 1)",
              (unsigned long long)i, id);
    }
}

static void test_temperature(token_sampler *t) {
    double p0[5] = {0.4, 0.25, 0.2, 0.1, 0.05};
    float l[5];
    log_of(l, p0, 5);
    const double temps[] = {1.0, 0.5, 2.0, 0.05};
    for (int k = 0; k < 4; k++) {
        double T = temps[k], want[5], z = 0;
        for (int i = 0; i < 5; i++) z += want[i] = exp((double)l[i] / T);
        for (int i = 0; i < 5; i++) want[i] /= z; /* softmax(l / T): p^(1/T), renormalised */
        char what[64];
        snprintf(what, sizeof what, "temperature %g", T);
        check_dist(what, probs(t, (token_sampling){.temperature = T, .top_p = 1}, l, 5, NULL), want, 5, 1e-7);
    }
}

static void test_top_k(token_sampler *t) {
    double p0[6] = {0.05, 0.3, 0.1, 0.25, 0.2, 0.1};
    float l[6];
    log_of(l, p0, 6);
    int64_t kept = 0;
    /* k = 3: ids 1, 3, 4 (0.3, 0.25, 0.2), renormalised over 0.75 */
    check_dist("top_k 3", probs(t, (token_sampling){.temperature = 1, .top_k = 3, .top_p = 1}, l, 6, &kept),
               (double[]){0, 0.4, 0, 0.25 / 0.75, 0.2 / 0.75, 0}, 6, 1e-7);
    CHECK(kept == 3, "top_k 3 keeps %lld", (long long)kept);
    /* k = 4: ids 2 and 5 tie at 0.1: the lower id, 2, is kept and 5 is not (exactly k) */
    check_dist("top_k 4 (tie)", probs(t, (token_sampling){.temperature = 1, .top_k = 4, .top_p = 1}, l, 6, &kept),
               (double[]){0, 0.3 / 0.85, 0.1 / 0.85, 0.25 / 0.85, 0.2 / 0.85, 0}, 6, 1e-7);
    CHECK(kept == 4, "top_k 4 keeps %lld", (long long)kept);
    for (int64_t k = 1; k <= 8; k++) {
        probs(t, (token_sampling){.temperature = 0.7, .top_k = k, .top_p = 1}, l, 6, &kept);
        CHECK(kept == (k < 6 ? k : 6), "top_k %lld keeps %lld", (long long)k, (long long)kept);
    }
    probs(t, (token_sampling){.temperature = 0.7, .top_k = 0, .top_p = 1}, l, 6, &kept);
    CHECK(kept == 6, "top_k 0 keeps %lld of 6", (long long)kept);
}

static void test_top_p(token_sampler *t) {
    double p0[4] = {0.125, 0.5, 0.125, 0.25}; /* exact in binary: the masses compare exactly */
    float l[4];
    log_of(l, p0, 4);
    int64_t kept = 0;
    const token_sampling s = {.temperature = 1, .top_p = 0.75};
    check_dist("top_p 0.75", probs(t, s, l, 4, &kept), (double[]){0, 2.0 / 3, 0, 1.0 / 3}, 4, 1e-7);
    CHECK(kept == 2, "top_p 0.75 (0.5 + 0.25 reach it) keeps %lld", (long long)kept);
    /* a hair above: the next token is needed; the tie at 0.125 keeps the lower id, 0 */
    check_dist("top_p 0.76", probs(t, (token_sampling){.temperature = 1, .top_p = 0.76}, l, 4, &kept),
               (double[]){0.125 / 0.875, 0.5 / 0.875, 0, 0.25 / 0.875}, 4, 1e-7);
    CHECK(kept == 3, "top_p 0.76 keeps %lld", (long long)kept);
    probs(t, (token_sampling){.temperature = 1, .top_p = 0.5}, l, 4, &kept);
    CHECK(kept == 1, "top_p 0.5 (the first token alone reaches it) keeps %lld", (long long)kept);
    probs(t, (token_sampling){.temperature = 1, .top_p = 1e-9}, l, 4, &kept);
    CHECK(kept == 1, "a tiny top_p keeps the most likely token: %lld", (long long)kept);
    probs(t, (token_sampling){.temperature = 1, .top_p = 1}, l, 4, &kept);
    CHECK(kept == 4, "top_p 1 keeps %lld of 4", (long long)kept);
    /* uniform: ties all the way, p = 0.5 keeps exactly 2, the lowest ids */
    float u[4] = {0, 0, 0, 0};
    check_dist("top_p 0.5 uniform", probs(t, (token_sampling){.temperature = 1, .top_p = 0.5}, u, 4, &kept),
               (double[]){0.5, 0.5, 0, 0}, 4, 1e-12);
    /* after top-k, over the renormalised head: {0.4, 0.3, 0.2, 0.1} with k = 2 is {4/7, 3/7},
     * whose first token reaches p = 0.5 alone (top-p first would have kept two) */
    double q0[4] = {0.4, 0.3, 0.2, 0.1};
    float q[4];
    log_of(q, q0, 4);
    check_dist("top_k 2 then top_p 0.5", probs(t, (token_sampling){.temperature = 1, .top_k = 2, .top_p = 0.5}, q, 4, &kept),
               (double[]){1, 0, 0, 0}, 4, 1e-12);
    /* temperature first: at T = 0.5 the masses are p^2 / 0.3 = {0.533, 0.3, 0.133, 0.033},
     * so p = 0.8 keeps two (at T = 1 it would take three) */
    probs(t, (token_sampling){.temperature = 0.5, .top_p = 0.8}, q, 4, &kept);
    CHECK(kept == 2, "temperature 0.5 then top_p 0.8 keeps %lld", (long long)kept);
}

/* Chi-square of n draws against the sampler's own distribution, which the tests above pin. */
static void test_frequencies(token_sampler *t) {
    enum { V = 8, N = 200000 };
    float l[V];
    for (int i = 0; i < V; i++) l[i] = (float)(0.9 * sin(1.7 * i) + 0.1 * i);
    const token_sampling opts[] = {{.temperature = 1, .top_p = 1, .seed = 11},
                                   {.temperature = 0.7, .top_k = 6, .top_p = 0.9, .seed = 12},
                                   {.temperature = 2.5, .top_k = 5, .top_p = 1, .seed = 13}};
    for (int c = 0; c < 3; c++) {
        int64_t kept = 0;
        const double *p = probs(t, opts[c], l, V, &kept);
        if (!p) return;
        double want[V];
        memcpy(want, p, sizeof want);
        long count[V] = {0};
        int outside = 0;
        for (uint64_t i = 0; i < N; i++) {
            int32_t id = -1;
            if (token_sampler_next(t, l, i, &id) != TR_OK || id < 0 || id >= V) {
                CHECK(0, "draw %llu: %d (%s)", (unsigned long long)i, id, tr_error_msg());
                return;
            }
            count[id]++;
            outside += want[id] == 0;
        }
        double chi2 = 0;
        for (int i = 0; i < V; i++)
            if (want[i] > 0) chi2 += pow((double)count[i] - N * want[i], 2) / (N * want[i]);
        /* the 0.999 quantile of chi-square with kept - 1 degrees of freedom (Wilson-Hilferty) */
        double df = (double)(kept - 1), a = 2.0 / (9 * df), bound = df * pow(1 - a + 3.09 * sqrt(a), 3);
        printf("case %d: %lld tokens kept, chi-square %.2f (bound %.2f, %g dof)\n", c, (long long)kept, chi2, bound, df);
        CHECK(outside == 0, "case %d: %d draws of tokens left out", c, outside);
        CHECK(chi2 < bound, "case %d: chi-square %.2f above %.2f", c, chi2, bound);
    }
}

static void test_seeds(token_sampler *t) {
    float l[16];
    for (int i = 0; i < 16; i++) l[i] = (float)(0.3 * i - 0.02 * i * i);
    int32_t a[64], b[64], c[64];
    const token_sampling s = {.temperature = 1, .top_k = 10, .top_p = 0.95, .seed = 5};
    token_sampler t2;
    token_sampling s2 = s;
    s2.seed = 6;
    CHECK(token_sampler_init(&t2, &s2, 16) == TR_OK, "init: %s", tr_error_msg());
    probs(t, s, l, 16, NULL);
    int same = 1, differs = 0;
    for (uint64_t i = 0; i < 64; i++) {
        token_sampler_next(t, l, i, &a[i]);
        token_sampler_next(&t2, l, i, &c[i]);
    }
    probs(t, s, l, 16, NULL); /* a sampler made again from the same seed */
    for (uint64_t i = 0; i < 64; i++) {
        token_sampler_next(t, l, i, &b[i]);
        same &= a[i] == b[i];
        differs |= a[i] != c[i];
    }
    CHECK(same, "seed 5 twice gave other tokens");
    CHECK(differs, "seeds 5 and 6 gave the same 64 tokens");
    token_sampler_free(&t2);
}

static void refused(token_sampling s, int64_t V, const char *want) {
    token_sampler t;
    tr_status st = token_sampler_init(&t, &s, V);
    CHECK(st != TR_OK && strstr(tr_error_msg(), want), "expected a refusal naming '%s', got %d: %s", want, st,
          tr_error_msg());
    if (st == TR_OK) token_sampler_free(&t);
}

static void test_refusals(token_sampler *t) {
    refused((token_sampling){.temperature = -0.5, .top_p = 1}, 4, "temperature -0.5");
    refused((token_sampling){.temperature = NAN, .top_p = 1}, 4, "temperature nan");
    refused((token_sampling){.temperature = INFINITY, .top_p = 1}, 4, "temperature inf");
    refused((token_sampling){.temperature = 1, .top_k = -1, .top_p = 1}, 4, "top_k -1");
    refused((token_sampling){.temperature = 1, .top_p = 0}, 4, "top_p 0");
    refused((token_sampling){.temperature = 1, .top_p = 1.5}, 4, "top_p 1.5");
    refused((token_sampling){.temperature = 1, .top_p = -0.1}, 4, "top_p -0.1");
    refused((token_sampling){.temperature = 1, .top_p = 1}, 0, "vocabulary of 0");
    const float bad[3][3] = {{0, NAN, 1}, {0, INFINITY, 1}, {-INFINITY, -INFINITY, -INFINITY}};
    const char *why[3] = {"logit of token 1 is nan", "logit of token 1 is inf", "every logit"};
    for (int k = 0; k < 3; k++)
        for (int greedy = 0; greedy < 2; greedy++) {
            token_sampler_free(t);
            token_sampler_init(t, &(token_sampling){.temperature = greedy ? 0 : 1, .top_p = 1}, 3);
            int32_t id;
            tr_status st = token_sampler_next(t, bad[k], 0, &id);
            CHECK(st != TR_OK && strstr(tr_error_msg(), why[k]), "logits %d (greedy %d): %d %s", k, greedy, st,
                  tr_error_msg());
        }
}

int main(void) {
    token_sampler t = {0};
    test_greedy(&t);
    test_temperature(&t);
    test_top_k(&t);
    test_top_p(&t);
    test_frequencies(&t);
    test_seeds(&t);
    test_refusals(&t);
    token_sampler_free(&t);
    return test_finish();
}
