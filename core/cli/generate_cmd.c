/* `trainer generate CONFIG --checkpoint PATH (--prompt TEXT | --prompt-file F) [--max-new-tokens N]
 * [--temperature T] [--top-k K] [--top-p P] [--seed S] [key=value ...]`: a language model's
 * continuation of a prompt (tr_run_generate, run/run_api.h). Standard output gets the prompt
 * and the text generated and nothing else (flushed per token on a terminal, with a newline at
 * the end there); the log goes to stderr. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "generate_cmd.h"
#include "cli_flag.h"
#include "plugins_cmd.h"
#include "run/run_api.h"
#include "trainer/io.h"

static int usage(FILE *f) {
    fprintf(f, "usage: trainer generate CONFIG.yaml --checkpoint PATH (--prompt TEXT | --prompt-file FILE) [options] "
                    "[section.key=value ...]\n"
                    "  continues the prompt with the config's language model (transformer, mode lm) and the checkpoint's\n"
                    "  weights; prints the prompt and the text generated\n"
                    "  --max-new-tokens N  tokens to add (default 100; fewer at the tokenizer's end-of-text token)\n"
                    "  --temperature T     0: always the most likely token (greedy); default 1\n"
                    "  --top-k K           draw from the K most likely tokens only (default 0: all)\n"
                    "  --top-p P           then from the fewest most likely whose probability reaches P (default 1: all)\n"
                    "  --seed S            the same seed gives the same text (default: the config's run.seed)\n"
                    "  --prompt-file FILE  the prompt is FILE's bytes (- : standard input)\n"
                    "  one forward of the last data.params.seq_len tokens per new token, on one device (docs/config.md)\n");
    return f == stdout ? 0 : 2;
}

static int is_help(const char *arg) { return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0; }

typedef struct out_state {
    int tty;
} out_state;

static void emit(void *user, const char *text, size_t len) {
    const out_state *o = user;
    fwrite(text, 1, len, stdout);
    if (o->tty) fflush(stdout);
}

/* v as a number (double) or an integer (int64_t, at least lo) for option `name`. */
static int parse_double(const char *name, const char *v, double *out) {
    char *end;
    errno = 0;
    *out = strtod(v, &end);
    if (end != v && !*end && !errno && isfinite(*out)) return 1;
    fprintf(stderr, "trainer generate: %s: expected a number, got '%s'\n", name, v);
    return 0;
}

static int parse_int(const char *name, const char *v, long long lo, long long *out) {
    char *end;
    errno = 0;
    *out = strtoll(v, &end, 10);
    if (end != v && !*end && !errno && *out >= lo) return 1;
    fprintf(stderr, "trainer generate: %s: expected an integer >= %lld, got '%s'\n", name, lo, v);
    return 0;
}

static int read_stdin(char **text, size_t *len) {
    size_t cap = 4096;
    *len = 0;
    *text = malloc(cap);
    while (*text) {
        *len += fread(*text + *len, 1, cap - *len, stdin);
        if (*len < cap) break;
        char *g = realloc(*text, cap *= 2);
        if (!g) free(*text);
        *text = g;
    }
    if (!*text || ferror(stdin)) {
        fprintf(stderr, "trainer generate: --prompt-file -: cannot read standard input%s\n", *text ? "" : ": out of memory");
        free(*text);
        *text = NULL;
        return 0;
    }
    return 1;
}

int trainer_generate_cmd(int argc, char **argv) {
    if (argc >= 1 && is_help(argv[0])) return usage(stdout);
    if (argc < 1 || argv[0][0] == '-') return usage(stderr);
    const char *checkpoint = NULL, *prompt = NULL, *prompt_file = NULL, *v[5] = {NULL};
    static const char *const numeric[5] = {"--max-new-tokens", "--temperature", "--top-k", "--top-p", "--seed"};
    const char *overrides[256];
    int n = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_flag(argc, argv, &i, "--checkpoint", &checkpoint);
        if (!r) r = cli_flag(argc, argv, &i, "--prompt", &prompt);
        if (!r) r = cli_flag(argc, argv, &i, "--prompt-file", &prompt_file);
        for (int k = 0; k < 5 && !r; k++) r = cli_flag(argc, argv, &i, numeric[k], &v[k]);
        if (r < 0) {
            fprintf(stderr, "trainer generate: %s needs a value\n", argv[i]);
            return usage(stderr);
        }
        if (r) continue;
        if (is_help(argv[i])) return usage(stdout); /* not where it is a value: --prompt -h */
        if (argv[i][0] == '-') {
            fprintf(stderr, "trainer generate: unknown option '%s'\n", argv[i]);
            return usage(stderr);
        }
        if (n == 256) {
            fprintf(stderr, "trainer generate: more than 256 overrides\n");
            return 2;
        }
        overrides[n++] = argv[i];
    }
    if (!checkpoint) {
        fprintf(stderr, "trainer generate: --checkpoint PATH is required\n");
        return usage(stderr);
    }
    if (!prompt == !prompt_file) {
        fprintf(stderr, "trainer generate: give the prompt with --prompt TEXT or --prompt-file FILE (one of them)\n");
        return usage(stderr);
    }
    long long max_new = 100, top_k = 0, seed = 0;
    tr_generate_options o = {.max_new_tokens = 100, .temperature = 1, .top_p = 1};
    if ((v[0] && !parse_int(numeric[0], v[0], 0, &max_new)) || (v[1] && !parse_double(numeric[1], v[1], &o.temperature)) ||
        (v[2] && !parse_int(numeric[2], v[2], 0, &top_k)) || (v[3] && !parse_double(numeric[3], v[3], &o.top_p)) ||
        (v[4] && !parse_int(numeric[4], v[4], 0, &seed)))
        return 2;
    o.max_new_tokens = max_new;
    o.top_k = top_k;
    o.has_seed = v[4] != NULL;
    o.seed = (uint64_t)seed;
    char *text = NULL;
    size_t len = 0;
    if (prompt) {
        o.prompt = prompt;
        o.prompt_len = strlen(prompt);
    } else if (strcmp(prompt_file, "-") == 0 ? !read_stdin(&text, &len) : tr_file_read(prompt_file, &text, &len) != TR_OK) {
        if (strcmp(prompt_file, "-") != 0) fprintf(stderr, "trainer generate: --prompt-file: %s\n", tr_error_msg());
        return 1;
    } else {
        o.prompt = text;
        o.prompt_len = len;
    }
    out_state out = {.tty = isatty(STDOUT_FILENO)};
    o.emit = emit;
    o.user = &out;
    tr_generate_result r;
    tr_status st = tr_run_generate(argv[0], overrides, n, trainer_default_plugin_dirs(), checkpoint, &o, &r);
    free(text);
    if (out.tty && st == TR_OK) fputc('\n', stdout);
    int bad_out = fflush(stdout) != 0 || ferror(stdout);
    if (st != TR_OK) {
        fprintf(stderr, "trainer generate: %s\n", tr_error_msg());
        return 1;
    }
    if (bad_out) {
        fprintf(stderr, "trainer generate: cannot write the text to standard output: %s\n", strerror(errno));
        return 1;
    }
    fprintf(stderr, "generate: %lld tokens after a prompt of %lld%s%s in %.3f s (%.1f tokens/s; context %lld, %s; %s)\n",
            (long long)r.new_tokens, (long long)r.prompt_tokens, r.stopped_at_eos ? ", stopped at " : "",
            r.stopped_at_eos ? r.eos_token : "", r.seconds, r.seconds > 0 ? (double)r.new_tokens / r.seconds : 0.0,
            (long long)r.context, r.description, r.checkpoint);
    return 0;
}
