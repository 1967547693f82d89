/* The --help of the commands that read a config (run, eval, predict, plan): how to call them,
 * how overrides are written, and one line per config section, pointing to docs/config.md for
 * every key. Kept in one place so the four commands say the same. */
#include "help.h"

#include <stdio.h>
#include <string.h>

int trainer_wants_help(int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) return 0;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return 1;
    }
    return 0;
}

static const char *usage_of(const char *command) {
    if (strcmp(command, "eval") == 0) return "trainer eval CONFIG.yaml --checkpoint PATH [--split val|train] [key=value ...]";
    if (strcmp(command, "predict") == 0)
        return "trainer predict CONFIG.yaml --checkpoint PATH --output FILE.csv [--split val|train] [key=value ...]";
    if (strcmp(command, "plan") == 0) return "trainer plan CONFIG.yaml [--json] [key=value ...]";
    return "trainer run CONFIG.yaml [key=value ...]";
}

int trainer_config_help(const char *command) {
    printf("usage: %s\n"
           "\n"
           "CONFIG.yaml is a YAML file of sections; each key=value argument overrides one key:\n"
           "  trainer.max_epochs=3   model.params.layers=[64, 64]   optimizer.betas[1]=0.99\n"
           "(key[N] is item N of a list, from 0; [length] appends one).\n"
           "\n"
           "sections:\n"
           "  run        name, seed, output_dir: the run folder is <output_dir>/<name>/<version>/\n"
           "  model      name (a model plugin), params (its options: trainer plugins --describe NAME), init_from\n"
           "  data       name (a dataset plugin), params, val_params, batch_size (global), shuffle, workers\n"
           "  optimizer  name (sgd, adam, adamw), lr, weight_decay, momentum, betas, eps\n"
           "  scheduler  name (constant, step, cosine), warmup_steps, step_size, gamma, min_lr\n"
           "  trainer    max_epochs, max_steps, devices, strategy, accelerator, early_stopping, fast_dev_run, ...\n"
           "  strategy   the chosen strategy plugin's options (trainer plugins --describe ddp)\n"
           "  checkpoint every_n_epochs, every_n_steps, keep_last, resume, monitor, mode, save_top_k, save_last\n"
           "  plugins    a list of plugin folders or .so files, searched first (relative to the config)\n"
           "\n"
           "Every key, its type and default: docs/config.md. The run folder's config.yaml is the\n"
           "resolved config (defaults filled in, paths absolute): it runs again from anywhere.\n",
           usage_of(command));
    if (strcmp(command, "run") == 0)
        printf("Running the same config again resumes an unfinished run from its newest checkpoint\n"
               "(Ctrl-C saves one and stops), or starts the next version when the run finished.\n");
    return 0;
}
