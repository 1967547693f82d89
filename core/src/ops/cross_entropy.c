/* Cross-entropy loss on logits: a fused, numerically stable log-softmax + NLL over the last
 * dim, with ignore_index and label smoothing exactly as PyTorch's
 * F.cross_entropy(logits, targets, ignore_index=, label_smoothing=, reduction='sum'),
 * divided by a caller-given normaliser (the global batch size makes the mean exact under
 * any data split). Class weights are not supported. Rows run in parallel; the per-sample
 * losses are summed in double in a fixed order, so the result does not depend on the number
 * of threads. Backward needs only two values per sample (row max and log-sum-exp) from the
 * arena. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "autograd/node.h"
#include "ops/cpu_kernels.h"
#include "trainer/ops.h"

#include "kernels/vmath.h"

#define TR_GENERIC "ops/cross_entropy.inc"
#include "ops/generic.h"

/* The scalar loss: the per-sample losses summed in order, divided by the normaliser. */
static void cross_entropy_total_f32(float *out, const double *loss, int64_t n, double normaliser) {
    double total = 0;
    for (int64_t i = 0; i < n; i++) total += loss[i];
    *out = (float)(total / normaliser);
}

/* in[0] logits; i: N, C, ignore_index; f: normaliser, smoothing; saved: stats (N, 2),
 * targets. */
static void cross_entropy_backward(tr_graph *g, tr_node *n) {
    tr_tensor *x = n->in[0];
    void *dx = op_grad(g, x);
    double dout;
    if (!dx || !op_read_grad_scalar(g, n->out, &dout)) return;
    OP_RUN(g, x->dtype, cross_entropy_backward, dx, x->data, n->saved[0], n->saved[1],
                dout / n->f[0], n->i[0], n->i[1], (int)n->i[2], n->f[1]);
}

tr_tensor *tr_cross_entropy(tr_graph *g, tr_tensor *logits, tr_tensor *targets,
                            double normaliser, int ignore_index, double label_smoothing) {
    if (!op_check(g, "cross_entropy", 1, logits)) return NULL;
    if (!targets)
        return op_fail(g, TR_ERR_INVALID,
                       "cross_entropy: targets are NULL (an earlier op failed?)");
    if (targets->dtype != TR_I32)
        return op_fail(g, TR_ERR_INVALID, "cross_entropy: targets have dtype %s; expected i32",
                       tr_dtype_name(targets->dtype));
    if (logits->ndim < 1 || logits->shape[logits->ndim - 1] < 1)
        return op_fail(g, TR_ERR_INVALID,
                       "cross_entropy: logits %s need a last dim of at least one class",
                       op_shape(logits));
    int64_t C = logits->shape[logits->ndim - 1], N = tr_tensor_dims(logits, 0, logits->ndim - 1);
    if (tr_tensor_numel(targets) != N)
        return op_fail(g, TR_ERR_INVALID,
                       "cross_entropy: targets %s do not match logits %s (%lld samples)",
                       op_shape(targets), op_shape(logits), (long long)N);
    if (!(normaliser > 0) || !isfinite(normaliser))
        return op_fail(g, TR_ERR_INVALID, "cross_entropy: normaliser %g must be positive",
                       normaliser);
    if (!(label_smoothing >= 0 && label_smoothing <= 1))
        return op_fail(g, TR_ERR_INVALID, "cross_entropy: label_smoothing %g is not in [0, 1]",
                       label_smoothing);
    if (!OP_DEVICE(g, "cross_entropy", cross_entropy_forward, cross_entropy_backward, loss_total)) return NULL;
    const int32_t *t = targets->data, *th = op_host_indices(g, "cross_entropy", "targets", targets, "logits", logits);
    if (!th) return NULL;
    for (int64_t i = 0; i < N; i++)
        if (th[i] != ignore_index && (th[i] < 0 || th[i] >= C))
            return op_fail(g, TR_ERR_INVALID,
                           "cross_entropy: target %d at index %lld is outside [0, %lld) and "
                           "is not ignore_index (%d)",
                           (int)th[i], (long long)i, (long long)C, ignore_index);

    int need = op_needs_grad(g, 1, logits);
    size_t rs = tr_dtype_size(logits->dtype);
    double *loss = op_data(g, (size_t)(N ? N : 1) * sizeof(double));
    void *stats = need ? op_data(g, (size_t)(N ? N : 1) * 2 * rs) : NULL;
    tr_tensor *y = op_out(g, logits->dtype, 1, (int64_t[]){1});
    if (!loss || (need && !stats) || !y) return NULL;
    OP_RUN(g, logits->dtype, cross_entropy_forward, loss, stats, logits->data, t, N, C,
                ignore_index, label_smoothing);
    if (logits->dtype == TR_F64) {
        double total = 0;
        for (int64_t i = 0; i < N; i++) total += loss[i];
        *(double *)y->data = total / normaliser;
    } else if (op_kernels(g)) {
        op_kernels(g)->loss_total(y->data, loss, N, normaliser);
    } else {
        cross_entropy_total_f32(y->data, loss, N, normaliser);
    }
    if (need) {
        tr_node *n = op_record(g, "cross_entropy", cross_entropy_backward, y, 1, logits);
        if (!n) return NULL;
        n->i[0] = N;
        n->i[1] = C;
        n->i[2] = ignore_index;
        n->f[0] = normaliser;
        n->f[1] = label_smoothing;
        n->saved[0] = stats;
        n->saved[1] = targets->data;
    }
    return y;
}

void ops_kernels_cross_entropy(tr_kernels *k) {
    k->cross_entropy_forward = cross_entropy_forward_f32;
    k->cross_entropy_backward = cross_entropy_backward_f32;
    k->loss_total = cross_entropy_total_f32;
}
