/* The `trainer` command line. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "checkpoint_cmd.h"
#include "demo.h"
#include "devices_cmd.h"
#include "embed_cmd.h"
#include "eval_cmd.h"
#include "export_cmd.h"
#include "generate_cmd.h"
#include "help.h"
#include "interrupt.h"
#include "launch_cmd.h"
#include "plan_cmd.h"
#include "plot_cmd.h"
#include "plugins_cmd.h"
#include "run_cmd.h"
#include "tokenize_cmd.h"
#include "trainer/trainer.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: trainer <command> [args]\n"
            "commands:\n"
            "  run CONFIG [key=value ...]\n"
            "                train from a YAML config (overrides like trainer.max_epochs=3)\n"
            "  eval CONFIG --checkpoint PATH [--split val|train] [key=value ...]\n"
            "                loss, accuracy, F1/precision/recall and confusion matrix, or MAE/RMSE/R^2 of a\n"
            "                checkpoint's weights (PATH: a checkpoint or run folder, best: the run's best, or a\n"
            "                .safetensors weights file), recorded in the run's metrics.jsonl\n"
            "  predict CONFIG --checkpoint PATH --output FILE.csv [--split val|train] [key=value ...]\n"
            "                one CSV row of predictions per sample (the validation file may lack labels)\n"
            "  embed CONFIG --input FILE --output OUT.npy [--scores FILE.csv] [--checkpoint PATH] [key=value ...]\n"
            "                the pooled embedding of each line of FILE, in order (.npy float32);\n"
            "                text<TAB>pair lines also score each pair (cosine similarity)\n"
            "  generate CONFIG --checkpoint PATH --prompt TEXT [--max-new-tokens N] [--temperature T]\n"
            "           [--top-k K] [--top-p P] [--seed S] [key=value ...]\n"
            "                a language model's continuation of the prompt (--prompt-file F: from a file),\n"
            "                printed after it; temperature 0 is greedy\n"
            "  plan CONFIG [key=value ...]\n"
            "                the strategy a run would use and why, and memory per rank for it and the\n"
            "                alternatives, without training\n"
            "  export CHECKPOINT OUTDIR [--format hf] [key=value ...]\n"
            "                a run's checkpoint as a Hugging Face model folder (config.json,\n"
            "                model.safetensors, tokenizer files) that transformers loads\n"
            "  plot RUN... [--metric NAME[,NAME...]] [--output FILE.svg|FILE.png|-] [--log-y] [--size WxH]\n"
            "                curves of runs against the step (default loss and val_loss; runs/<name>/<version>,\n"
            "                runs/<name>: its newest version), from their metrics.jsonl\n"
            "  checkpoint consolidate DIR OUT.safetensors\n"
            "                one weights file from a sharded (or full) checkpoint\n"
            "  demo          train an MLP on a synthetic task with the core alone\n"
            "                (--epochs=N, --seed=N)\n"
            "  launch [-n N] [--max-restarts K] [--] COMMAND [ARGS...]\n"
            "                run N supervised ranks of a command on this host (torchrun's env)\n"
            "  tokenize TOKENIZER [FILE] [--pair] [--no-special] [--tokens] [--decode] [--max-length N]\n"
            "                ids of each line of text, from a Hugging Face tokenizer.json (docs/tokenizers.md)\n"
            "  devices       the CPU, GPUs and communication backends found, and why one is missing\n"
            "  plugins       list the plugins found (--describe NAME, --check FILE.so)\n"
            "  version       print the version\n"
            "trainer run|eval|predict|plan --help: the arguments and the config's sections (docs/config.md)\n");
}

int main(int argc, char **argv) {
    /* Over the file size limit (ulimit -f) a write then fails with EFBIG, which the writers
     * report naming the file, instead of the process dying of SIGXFSZ mid-checkpoint. */
    signal(SIGXFSZ, SIG_IGN);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
        printf("trainer %s (ABI %d.%d)\n", tr_version(), TR_ABI_MAJOR, TR_ABI_MINOR);
        return 0;
    }
    static const char *const with_config[] = {"run", "eval", "predict", "plan"};
    for (int i = 0; i < 4; i++)
        if (strcmp(argv[1], with_config[i]) == 0 && trainer_wants_help(argc - 2, argv + 2))
            return trainer_config_help(argv[1]);
    if (strcmp(argv[1], "run") == 0) {
        /* The ranks trainer run launches itself take their own handlers (launcher.c). */
        trainer_interrupt_install();
        int rc = trainer_run_cmd(argc - 2, argv + 2);
        return rc && trainer_interrupt_signal() ? 128 + trainer_interrupt_signal() : rc;
    }
    if (strcmp(argv[1], "devices") == 0) return trainer_devices_cmd(argc - 2, argv + 2);
    if (strcmp(argv[1], "plan") == 0) return trainer_plan_cmd(argc - 2, argv + 2);
    if (strcmp(argv[1], "eval") == 0) return trainer_eval_cmd(argc - 2, argv + 2, 0);
    if (strcmp(argv[1], "predict") == 0) return trainer_eval_cmd(argc - 2, argv + 2, 1);
    if (strcmp(argv[1], "embed") == 0) return trainer_embed_cmd(argc - 2, argv + 2);
    if (strcmp(argv[1], "generate") == 0) return trainer_generate_cmd(argc - 2, argv + 2);
    if (strcmp(argv[1], "export") == 0) return trainer_export_cmd(argc - 2, argv + 2);
    if (strcmp(argv[1], "plot") == 0) return trainer_plot_cmd(argc - 2, argv + 2);
    if (strcmp(argv[1], "launch") == 0) return trainer_launch_cmd(argc - 2, argv + 2);
    if (strcmp(argv[1], "plugins") == 0) return trainer_plugins_cmd(argc - 2, argv + 2);
    if (strcmp(argv[1], "checkpoint") == 0) return trainer_checkpoint_cmd(argc - 2, argv + 2);
    if (strcmp(argv[1], "tokenize") == 0) return trainer_tokenize_cmd(argc - 2, argv + 2);
    if (strcmp(argv[1], "demo") == 0) return trainer_demo(argc - 2, argv + 2);
    if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "trainer: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
