/* Private to the job: what its files share. job.c opens and closes a job (the datasets, the
 * model, validation, checkpoints); job_plugins.c reads a plugin's options from the config and
 * finds the plugins and datasets; job_settings.c reads and checks the trainer's settings;
 * job_strategy.c chooses and readies the strategy. */
#ifndef TRAINER_RUN_JOB_PARTS_H
#define TRAINER_RUN_JOB_PARTS_H

#include <stddef.h>

#include "job.h"
#include "trainer/config.h"

/* A growing string: option texts have no length limit (a list of class names can be long). */
typedef struct text_buf {
    char *s;
    size_t len, cap;
    int oom;
} text_buf;

tr_status job_options_from(const tr_cfg_node *map, const tr_cfg_node *over, const char *section,
                           const tr_plugin *p, tr_options **out);
tr_status job_plugin_named(job *j, const char *key, const char *name, tr_plugin_kind kind,
                           const tr_plugin **out);
int job_cfg_has_key(const tr_cfg_node *map, const char *key);
void job_value_text(const tr_cfg_node *v, text_buf *b);
tr_status job_find_plugins(job *j, const char *const *plugin_dirs);
tr_status job_plugin_for(job *j, const char *section, tr_plugin_kind kind, const tr_plugin **out);
tr_status job_make_dataset(job *j, tr_split split, void **out);
tr_status job_check_sections(const tr_cfg_node *r);
tr_status job_plugin_defaults(job *j, const char *section, const tr_plugin *p);
tr_status job_settings_read(job *j, job_settings *s);
tr_status job_choose_strategy(job *j);

#endif
