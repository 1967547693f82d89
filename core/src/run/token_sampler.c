/* The next token from a language model's logits (token_sampler.h): greedy, or temperature,
 * top-k and top-p in Hugging Face's order, in double precision. Each call ranks the whole
 * vocabulary once (a sort) when top-k or top-p is on: fine for the vocabularies of a few
 * hundred thousand tokens at most that one forward per token already dwarfs. */
#include "token_sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/rng.h"

/* The uniform numbers of generation: one stream of their own under the seed. */
#define SAMPLER_STREAM (TR_RNG_STREAM_USER + 1)

tr_status token_sampling_check(const token_sampling *s) {
    if (!(s->temperature >= 0) || isinf(s->temperature))
        return tr_error_set(TR_ERR_INVALID, "temperature %g: expected a finite number >= 0 (0 picks the most likely "
                                            "token; 1 samples the model's own distribution)", s->temperature);
    if (s->top_k < 0)
        return tr_error_set(TR_ERR_INVALID, "top_k %lld: expected an integer >= 0 (0 keeps every token)", (long long)s->top_k);
    if (!(s->top_p > 0 && s->top_p <= 1))
        return tr_error_set(TR_ERR_INVALID, "top_p %g: expected a number in (0, 1] (1 keeps every token)", s->top_p);
    return TR_OK;
}

tr_status token_sampler_init(token_sampler *t, const token_sampling *s, int64_t V) {
    memset(t, 0, sizeof *t);
    TR_CHECK(token_sampling_check(s));
    if (V < 1 || V > INT32_MAX) return tr_error_set(TR_ERR_INVALID, "token sampler: vocabulary of %lld tokens", (long long)V);
    t->s = *s;
    t->V = V;
    t->p = malloc((size_t)V * sizeof *t->p);
    t->rank = malloc((size_t)V * sizeof *t->rank);
    if (!t->p || !t->rank) {
        token_sampler_free(t);
        return tr_error_set(TR_ERR_NOMEM, "token sampler: out of memory for %lld tokens", (long long)V);
    }
    return TR_OK;
}

void token_sampler_free(token_sampler *t) {
    free(t->p);
    free(t->rank);
    t->p = NULL;
    t->rank = NULL;
}

static int by_falling_logit(const void *a, const void *b) {
    const token_rank *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* The argmax (the lowest id among equal maxima) after checking every logit. */
static tr_status check_logits(const float *l, int64_t V, int64_t *best) {
    int64_t b = 0;
    for (int64_t i = 0; i < V; i++) {
        if (isnan(l[i]) || l[i] == INFINITY)
            return tr_error_set(TR_ERR_INVALID, "the model's logit of token %lld is %g: cannot pick the next token",
                                (long long)i, (double)l[i]);
        if (l[i] > l[b]) b = i;
    }
    if (l[b] == -INFINITY)
        return tr_error_set(TR_ERR_INVALID, "every logit of the model is -inf: no token can come next");
    *best = b;
    return TR_OK;
}

tr_status token_sampler_probs(token_sampler *t, const float *logits, int64_t *kept) {
    int64_t V = t->V, best = 0, n = 0;
    TR_CHECK(check_logits(logits, V, &best));
    double *p = t->p, T = t->s.temperature, top = (double)logits[best];
    memset(p, 0, (size_t)V * sizeof *p);
    if (T == 0) {
        p[best] = 1;
        if (kept) *kept = 1;
        return TR_OK;
    }
    int64_t k = t->s.top_k > 0 && t->s.top_k < V ? t->s.top_k : V;
    if (k == V && t->s.top_p >= 1) { /* every token: no ranking needed */
        double z = 0;
        for (int64_t i = 0; i < V; i++) z += p[i] = exp(((double)logits[i] - top) / T);
        for (int64_t i = 0; i < V; i++) n += (p[i] /= z) > 0;
        if (kept) *kept = n;
        return TR_OK;
    }
    token_rank *r = t->rank;
    for (int64_t i = 0; i < V; i++) r[i] = (token_rank){.logit = logits[i], .id = (int32_t)i};
    qsort(r, (size_t)V, sizeof *r, by_falling_logit);
    double z = 0;
    for (int64_t i = 0; i < k; i++) z += p[r[i].id] = exp(((double)r[i].logit - top) / T);
    if (t->s.top_p < 1) { /* the shortest head of the ranking whose mass reaches top_p */
        double mass = 0;
        int64_t m = 0;
        while (m < k && (mass += p[r[m].id] / z) < t->s.top_p) m++;
        if (m < k) m++; /* the token that reached it */
        for (int64_t i = m; i < k; i++) p[r[i].id] = 0;
        k = m;
        z = 0;
        for (int64_t i = 0; i < k; i++) z += p[r[i].id];
    }
    for (int64_t i = 0; i < k; i++) n += (p[r[i].id] /= z) > 0;
    if (kept) *kept = n;
    return TR_OK;
}

/* Uniform in [0, 1) with 53 random bits: element `index` of the sampler's stream. */
static double uniform53(uint64_t seed, uint64_t index) {
    uint32_t w[4];
    tr_philox4x32(w, seed, SAMPLER_STREAM, index);
    return (double)(((uint64_t)(w[0] >> 5) << 26) | (w[1] >> 6)) * 0x1p-53;
}

tr_status token_sampler_next(token_sampler *t, const float *logits, uint64_t index, int32_t *id) {
    TR_CHECK(token_sampler_probs(t, logits, NULL));
    double u = uniform53(t->s.seed, index), acc = 0;
    int64_t last = -1;
    for (int64_t i = 0; i < t->V; i++) {
        if (t->p[i] <= 0) continue;
        last = i;
        if (u < (acc += t->p[i])) break;
    }
    *id = (int32_t)last; /* the last kept token when rounding left the sum short of u */
    return TR_OK;
}
