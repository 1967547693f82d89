/* Private: the text side of `trainer generate`: the prompt as token ids, and the tokens the
 * model adds back to text, handed to an emit callback as they come.
 *
 *   gen_text t;
 *   TR_CHECK(gen_text_open(&t, tokenizer_path_or_NULL, emit, stdout));
 *   TR_CHECK(gen_text_prompt(&t, "ROMEO:", 6));   // t.ids, t.n: its tokens
 *   ... model(t.ids, t.n) -> id; if (id == t.eos) break; TR_CHECK(gen_text_push(&t, id)); ...
 *   TR_CHECK(gen_text_finish(&t));                 // emits what was held back
 *   gen_text_close(&t);
 *
 * Without a tokenizer a token is a byte (ids 0..255), written as it comes, valid UTF-8 or not.
 * With one (a Hugging Face tokenizer.json) the prompt is encoded with the post-processor's
 * leading special tokens (a BOS) but not its trailing ones ([SEP], </s>: the text goes on),
 * and the continuation is what Hugging Face's text-generation pipeline returns after the
 * prompt: decode(prompt + new ids, special tokens skipped) past the length of decode(prompt).
 * It is emitted up to its last space or newline as tokens come (a later token may still join
 * the last word, or complete a character split over byte-level tokens), the rest at the end.
 * The end-of-text token is the first special token named <|endoftext|>, </s>,
 * <|end_of_text|>, <|eot_id|>, <|im_end|> or <eos> (-1: none, or no tokenizer). */
#ifndef TRAINER_RUN_GEN_TEXT_H
#define TRAINER_RUN_GEN_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/status.h"
#include "trainer/tokenizer.h"

/* Writes len bytes of output text. */
typedef void (*gen_emit_fn)(void *user, const char *text, size_t len);

typedef struct gen_text {
    tr_tokenizer *tok;       /* owned; NULL: bytes */
    int32_t eos;             /* the end-of-text id, -1 none */
    const char *eos_token;   /* its string (borrowed from tok), NULL none */
    int32_t *ids;            /* (n) the prompt's ids, then the generated ones */
    size_t n, cap, n_prompt;
    size_t prompt_len;       /* tokenizer: bytes of decode(the prompt's ids) */
    size_t emitted;          /* tokenizer: bytes of the continuation emitted */
    gen_emit_fn emit;
    void *user;
} gen_text;

/* tokenizer: a tokenizer.json or a folder holding one, NULL for bytes. Its own truncation and
 * padding are turned off (the caller keeps the context to the model's length). */
tr_status gen_text_open(gen_text *t, const char *tokenizer, gen_emit_fn emit, void *user);
/* Encodes the prompt into t->ids (the caller writes the prompt itself, as given). */
tr_status gen_text_prompt(gen_text *t, const char *text, size_t len);
/* Appends a generated id and emits the text it completes. */
tr_status gen_text_push(gen_text *t, int32_t id);
/* Emits the rest of the continuation. */
tr_status gen_text_finish(gen_text *t);
void gen_text_close(gen_text *t);

#endif
