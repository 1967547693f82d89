/* Scored text pairs for embedding models (the transformer's mode pairs, hf_encoder's task
 * pairs): a query and a passage per sample, encoded as one batch, scored by the cosine
 * similarity of their pooled embeddings and trained to the sample's score with the squared
 * error (sentence-transformers' CosineSimilarityLoss).
 *
 *   TR_CHECK(pair_spec_check(d, "transformer: mode pairs"));  // in create
 *   tr_tensor *ids = pair_rows(g, b->x);                       // in forward: (B, 2, T) -> (2B, T)
 *   ... e = pooled embeddings of ids, (2B, E) ...
 *   pair_head(g, e, b, out);
 *
 * Compiled into each model plugin that uses it (a static source, no exported symbol). */
#ifndef TRAINER_PAIR_HEAD_H
#define TRAINER_PAIR_HEAD_H

#include "trainer/model.h"

/* TR_OK when the dataset gives scored pairs: x TR_I32 token ids (2, T), y one TR_F32 score
 * (the text dataset's mode pairs); else an error whose message starts with `who`. */
tr_status pair_spec_check(const tr_data_spec *d, const char *who);

/* x (B, 2, T) token ids as rows (2B, T): rows 2s and 2s + 1 sample s's query and passage.
 * Tells the graph that dim 0 now holds 2 rows per sample (tr_graph_set_rows_per_sample), so
 * dropout draws each text's masks as row 2 * (global sample) + k: not as if the first rows
 * were the batch's samples (which repeated masks over replicas, and differed from one
 * replica's), and the same for any split of the batch. */
tr_tensor *pair_rows(tr_graph *g, tr_tensor *x);

/* e (2B, E): the pooled embeddings of the batch's texts, rows 2b and 2b + 1 the query and the
 * passage of sample b (pair_rows' order). Sets out->logits (B, 1) to each
 * pair's cosine similarity (norms clamped at 1e-8, as torch's), out->embedding (B, 2E) (e's
 * rows as given, side by side) and,
 * when b->y (B) holds the scores, out->loss to the summed squared error / b->normaliser. */
void pair_head(tr_graph *g, tr_tensor *e, const tr_batch *b, tr_model_out *out);

#endif
