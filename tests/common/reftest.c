/* Reference-test driver (see reftest.h). */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "refio.h"
#include "reftest.h"

double reftest_op(const char *case_name, reftest_fn fn, void *ctx, const char *const *inputs,
                  double tol) {
    ref_file *rf = ref_open(case_name);
    tr_graph *g;
    if (tr_graph_create(&g, 1 << 20) != TR_OK) {
        test_fail_at(__FILE__, __LINE__, "graph create failed");
        return 1;
    }
    tr_graph_set_rng(g, 1234, 0, 0);
    tr_tensor *in[16];
    int n = 0;
    for (; inputs[n]; n++) {
        const ref_tensor *r = ref_need(rf, inputs[n]);
        in[n] = ref_to_graph(g, r, r->dtype == TR_F32 || r->dtype == TR_F64);
    }
    double worst = 0;
    tr_tensor *out = fn(g, in, ctx);
    if (!out) {
        test_fail_at(__FILE__, __LINE__, "%s: forward failed: %s", case_name, tr_error_msg());
        goto done;
    }
    char label[192];
    const ref_tensor *ro = ref_need(rf, "out");
    CHECK(tr_tensor_numel(out) == ro->numel, "%s: output has %lld elements, torch %lld",
          case_name, (long long)tr_tensor_numel(out), (long long)ro->numel);
    if (tr_tensor_numel(out) != ro->numel) goto done;
    snprintf(label, sizeof label, "%s: out", case_name);
    double e = check_tensor(label, out->data, ro->data, ro->numel, tol);
    if (e > worst) worst = e;
    const ref_tensor *rd = ref_get(rf, "dout");
    if (rd) {
        if (tr_backward(g, out, rd->data) != TR_OK) {
            test_fail_at(__FILE__, __LINE__, "%s: backward failed: %s", case_name, tr_error_msg());
            goto done;
        }
        for (int i = 0; i < n; i++) {
            char gname[160];
            snprintf(gname, sizeof gname, "%s.grad", inputs[i]);
            const ref_tensor *rg = ref_get(rf, gname);
            if (!rg) continue;
            CHECK(in[i]->grad != NULL, "%s: %s has no gradient", case_name, inputs[i]);
            if (!in[i]->grad) continue;
            snprintf(label, sizeof label, "%s: %s", case_name, gname);
            e = check_tensor(label, in[i]->grad, rg->data, rg->numel, tol);
            if (e > worst) worst = e;
        }
    }
done:
    tr_graph_destroy(g);
    ref_close(rf);
    return worst;
}
