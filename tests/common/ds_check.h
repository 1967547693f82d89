/* Helpers for the dataset plugin tests (tests/unit/dataset_*.c): the built plugins opened
 * by path, a temporary folder for the files a test writes, datasets made from "key=value"
 * options, and checks of refusals and of get() from two threads. */
#ifndef TRAINER_TEST_DS_CHECK_H
#define TRAINER_TEST_DS_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/model.h"
#include "trainer/plugin.h"

typedef struct ds {
    tr_plugin *p;
    const tr_dataset_ops *ops;
    void *ctx;
    tr_data_spec spec;
    int64_t n;
} ds;

/* The temporary folder (ds_setup makes it, ds_teardown checks it was left empty). */
extern char ds_tmpdir[256];

/* Opens the four dataset plugins (skips the test, 77, when one is not built) and makes the
 * temporary folder: 0, or -1 after a failed check. */
int ds_setup(void);
void ds_teardown(void);
/* The opened plugin of that name (synthetic, idx, csv or text). */
tr_plugin *ds_plugin(const char *name);
/* Creates a dataset from "key=value" options; on failure returns the status (ctx NULL). */
tr_status ds_open(ds *d, const char *name, const char *const *kv, int n_kv, tr_split split, uint64_t seed,
                  const char *base, double val_fraction);
void ds_close(ds *d);
/* Expects create to fail with status want and a message holding n1 (and n2 unless NULL). */
void ds_expect_error(const char *name, const char *const *kv, int n_kv, tr_split split, double val_fraction,
                     tr_status want, const char *n1, const char *n2);
/* Files in the temporary folder. */
void ds_write_file(const char *name, const void *data, size_t len);
void ds_write_text(const char *name, const char *s);
void ds_remove_file(const char *name);
/* get() of every sample from two threads equals the serial gets. */
void ds_check_threads(const char *what, const ds *d);

#endif
