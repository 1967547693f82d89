/* Private: the next token of a language model from its logits, as Hugging Face's generate()
 * picks it: greedy (temperature 0: the most likely token), or a draw from the softmax of the
 * logits divided by the temperature, after top-k, then top-p (nucleus) left out the rest.
 *
 *   token_sampler s;
 *   TR_CHECK(token_sampler_init(&s, &(token_sampling){.temperature = 0.8, .top_k = 40,
 *                                                      .top_p = 0.95, .seed = 7}, V));
 *   int32_t id;
 *   TR_CHECK(token_sampler_next(&s, logits, n_generated, &id));   // logits: (V)
 *   token_sampler_free(&s);
 *
 * A draw is a pure function of (seed, index, logits) (the counter-based RNG): the same seed
 * gives the same tokens. Ties (equal logits) rank the lower id first, for argmax as for top-k
 * and top-p, so top-k keeps exactly k tokens. docs/config.md, "trainer generate". */
#ifndef TRAINER_RUN_TOKEN_SAMPLER_H
#define TRAINER_RUN_TOKEN_SAMPLER_H

#include <stdint.h>

#include "trainer/status.h"

typedef struct token_sampling {
    double temperature;   /* 0: greedy (top_k and top_p then unused); else > 0 */
    int64_t top_k;        /* keep the k most likely tokens; 0: all */
    double top_p;         /* then the fewest most likely tokens whose mass is >= top_p; in (0, 1], 1: all */
    uint64_t seed;
} token_sampling;

typedef struct token_rank {
    float logit;
    int32_t id;
} token_rank;

typedef struct token_sampler {
    token_sampling s;
    int64_t V;
    double *p;            /* (V) the distribution of the last token_sampler_probs */
    token_rank *rank;     /* (V) scratch: the tokens by falling logit, ties by id */
} token_sampler;

/* The options' ranges (temperature >= 0, top_k >= 0, 0 < top_p <= 1), finite; a refusal
 * names the option and its value. */
tr_status token_sampling_check(const token_sampling *s);
/* Checks s and makes room for a vocabulary of V tokens. */
tr_status token_sampler_init(token_sampler *t, const token_sampling *s, int64_t V);
void token_sampler_free(token_sampler *t);
/* The distribution the next token is drawn from into t->p (V): 0 for the tokens left out,
 * summing to 1 (greedy: 1 at the argmax); *kept (may be NULL) is how many are not 0. Logits
 * holding NaN or +inf, or -inf only, are refused. */
tr_status token_sampler_probs(token_sampler *t, const float *logits, int64_t *kept);
/* The token drawn from token_sampler_probs(logits) with uniform number `index` of the seed's
 * stream (the position of the token in the generated text). */
tr_status token_sampler_next(token_sampler *t, const float *logits, uint64_t index, int32_t *id);

#endif
