/* Reads reference tensors written by tools/reference/refio.py.
 *
 *   ref_file *rf = ref_open("linear");                 // $TRAINER_REF_DIR/linear.bin
 *   const ref_tensor *x = ref_need(rf, "x");            // a missing name fails the test
 *   tr_tensor *t = ref_to_graph(g, x, 1);               // copy into a graph leaf
 *   ref_close(rf);
 *
 * File format (little-endian): "TRREF1\n", u32 count, then per tensor: u32 name length,
 * name bytes, u32 dtype (tr_dtype numbering), u32 ndim, i64 shape[ndim], raw data. */
#ifndef TRAINER_TEST_REFIO_H
#define TRAINER_TEST_REFIO_H

#include <stdint.h>

#include "trainer/graph.h"
#include "trainer/tensor.h"

typedef struct ref_tensor {
    char name[128];
    tr_dtype dtype;
    int ndim;
    int64_t shape[TR_MAX_DIMS];
    int64_t numel;
    void *data;
} ref_tensor;

typedef struct ref_file {
    char path[512];
    int n;
    ref_tensor *t;
} ref_file;

/* Opens TRAINER_REF_DIR/<case_name>.bin; on failure reports and exits the test with 1. */
ref_file *ref_open(const char *case_name);
void ref_close(ref_file *rf);
/* NULL when absent. */
const ref_tensor *ref_get(const ref_file *rf, const char *name);
/* As ref_get; a missing name fails and exits the test. */
const ref_tensor *ref_need(const ref_file *rf, const char *name);
/* A tensor in the graph's arena with the reference's shape, dtype and data; a leaf with a
 * zero gradient when requires_grad. */
tr_tensor *ref_to_graph(tr_graph *g, const ref_tensor *r, int requires_grad);
/* The reference's data as float (converting from f64 if needed) into a new tr_malloc array. */
float *ref_floats(const ref_tensor *r);

#endif
