/* trainer.on_nan: naming the first non-finite tensor of a step (docs/reliability.md).
 *
 * Nothing here runs on a healthy step: the loop notes a non-finite micro-batch loss as it
 * comes and asks for a description only when the step's loss, summed over ranks, or its
 * global gradient norm is not finite. Every rank then contributes what it holds to one
 * all_sum: per-rank loss flags and values, per-rank batch findings, and per-tensor flags for
 * parameters, gradients (the strategy's nonfinite entry) and buffers. */
#include "nonfinite.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "trainer/memory.h"

#define ACT_MAX 256 /* an activation's description */
#define LIST_MAX 4  /* ranks listed by name */

static const char *number(double x) { return isnan(x) ? "nan" : x > 0 ? "inf" : "-inf"; }

static int64_t first_bad(const float *v, int64_t rows, int64_t per_row) {
    for (int64_t i = 0; i < rows; i++)
        for (int64_t k = 0; k < per_row; k++)
            if (!isfinite(v[i * per_row + k])) return i;
    return -1;
}

void nonfinite_note(nonfinite_seen *seen, const tr_data_spec *spec, const tr_host_batch *hb, double loss) {
    if (!seen->loss_bad) {
        seen->loss_bad = 1;
        seen->loss = loss;
    }
    nonfinite_scan(seen, spec, hb);
}

void nonfinite_scan(nonfinite_seen *seen, const tr_data_spec *spec, const tr_host_batch *hb) {
    if (seen->data_bad || !hb) return;
    int64_t i = -1;
    if (spec->x_dtype == TR_F32 && (i = first_bad(hb->x, hb->size, spec->x_numel)) >= 0) seen->data_bad = 1;
    else if (spec->y_dtype == TR_F32 && (i = first_bad(hb->y, hb->size, spec->y_numel > 0 ? spec->y_numel : 1)) >= 0)
        seen->data_bad = 2;
    seen->sample = i;
}

/* Appends to out, a bounded string. */
static void append(char *out, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *out, size_t size, const char *fmt, ...) {
    size_t at = strlen(out);
    if (at + 1 >= size) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out + at, size - at, fmt, ap);
    va_end(ap);
}

/* "NAME" or "NAME and K others" for the flagged entries of v (names from name(P, k)). */
static int first_flagged(const double *v, int n, char *out, size_t size, tr_params *P,
                         const char *(*name)(const tr_params *, int)) {
    int first = -1, count = 0;
    for (int k = 0; k < n; k++)
        if (v[k] > 0) {
            if (first < 0) first = k;
            count++;
        }
    if (first < 0) return 0;
    if (count > 1) snprintf(out, size, "%s (and %d more)", name(P, first), count - 1);
    else snprintf(out, size, "%s", name(P, first));
    return 1;
}

tr_status nonfinite_describe(job *j, const nonfinite_seen *seen, int64_t step, double gnorm, int gnorm_bad, char *out,
                             size_t size, int *model_bad) {
    int W = j->info.world > 0 ? j->info.world : 1, r = j->info.rank;
    nonfinite_seen mine = *seen;
    nonfinite_scan(&mine, &j->spec, mine.last);
    seen = &mine;
    tr_params *P;
    if (j->sops->shards) {
        tr_state_shards sh;
        TR_CHECK(j->sops->shards(j->strat, &sh));
        P = sh.P;
    } else {
        tr_optim *opt;
        TR_CHECK(j->sops->state(j->strat, &P, &opt));
    }
    int n = tr_params_count(P), nb = tr_params_buffer_count(P);
    /* [loss bad | loss value | batch finding | data kind | activation found] per rank, then
     * parameters, gradients, buffers */
    size_t len = 5 * (size_t)W + 2 * (size_t)n + (size_t)nb;
    double *v = tr_calloc(len, sizeof *v);
    if (!v) return tr_error_set(TR_ERR_NOMEM, "step %lld: out of memory describing non-finite values", (long long)step);
    double *loss_bad = v, *loss = v + W, *sample = v + 2 * W, *kind = v + 3 * W, *act = v + 4 * W, *params = v + 5 * W,
           *grads = params + n, *bufs = grads + n;
    char activation[ACT_MAX] = "";
    loss_bad[r] = seen->loss_bad;
    loss[r] = seen->loss_bad ? seen->loss : 0;
    sample[r] = seen->data_bad ? (double)seen->sample + 1 : 0;
    kind[r] = seen->data_bad;
    tr_status st = j->sops->nonfinite ? j->sops->nonfinite(j->strat, params, n, activation, sizeof activation) : TR_OK;
    activation[ACT_MAX - 1] = 0;
    act[r] = activation[0] != 0;
    for (int b = 0; b < nb && st == TR_OK; b++) {
        const tr_tensor *t = tr_params_buffer(P, b);
        const float *x = t->data;
        for (int64_t i = 0, m = tr_tensor_numel(t); i < m; i++)
            if (!isfinite(x[i])) {
                bufs[b] = 1;
                break;
            }
    }
    if (st == TR_OK && j->sops->all_sum) st = j->sops->all_sum(j->strat, v, (int)len);
    /* The lowest rank with a non-finite activation tells the others which (one more sum). */
    int act_rank = -1;
    for (int k = 0; k < W && act_rank < 0 && st == TR_OK; k++)
        if (act[k] > 0) act_rank = k;
    if (st == TR_OK && act_rank >= 0 && W > 1 && j->sops->all_sum) {
        double text[ACT_MAX] = {0};
        for (int i = 0; i < ACT_MAX && r == act_rank; i++) text[i] = (unsigned char)activation[i];
        st = j->sops->all_sum(j->strat, text, ACT_MAX);
        for (int i = 0; i < ACT_MAX; i++) activation[i] = (char)(int)text[i];
        activation[ACT_MAX - 1] = 0;
    }
    if (st != TR_OK) {
        tr_free(v);
        return st;
    }

    snprintf(out, size, "step %lld: not finite:", (long long)step);
    int any_loss = 0;
    for (int k = 0; k < W; k++)
        if (loss_bad[k] > 0) {
            if (any_loss == LIST_MAX) {
                int more = 0;
                for (int m = k; m < W; m++) more += loss_bad[m] > 0;
                append(out, size, " and %d more ranks", more);
                break;
            }
            append(out, size, any_loss ? ", %s" : " the loss (%s", number(loss[k]));
            if (W > 1) append(out, size, " on rank %d", k);
            any_loss++;
        }
    if (any_loss) append(out, size, ")");
    if (!isfinite(gnorm)) append(out, size, "%s the gradient norm (%s)", any_loss ? "," : "", number(gnorm));
    else if (gnorm_bad) append(out, size, "%s the gradient norm (on another rank)", any_loss ? "," : "");

    char name[300], what[400] = "";
    int data_rank = -1;
    for (int k = 0; k < W && data_rank < 0; k++)
        if (sample[k] > 0) data_rank = k;
    *model_bad = 0;
    if (first_flagged(params, n, name, sizeof name, P, tr_params_name)) {
        snprintf(what, sizeof what, "parameter %s", name);
        *model_bad = 1;
    } else if (data_rank >= 0) {
        snprintf(what, sizeof what, "the batch's %s (sample %.0f", kind[data_rank] > 1.5 ? "target" : "input",
                 sample[data_rank] - 1);
        if (W > 1) append(what, sizeof what, " of rank %d's share", data_rank);
        append(what, sizeof what, ")");
    } else if (act_rank >= 0) {
        snprintf(what, sizeof what, "%s", activation);
        if (W > 1) append(what, sizeof what, " on rank %d", act_rank);
    } else if (first_flagged(bufs, nb, name, sizeof name, P, tr_params_buffer_name)) {
        snprintf(what, sizeof what, "buffer %s", name);
        *model_bad = 1;
    } else if (any_loss) {
        for (int k = 0; k < W; k++)
            if (loss_bad[k] > 0) {
                snprintf(what, sizeof what, "the loss");
                if (W > 1) append(what, sizeof what, " on rank %d", k);
                break;
            }
    } else if (first_flagged(grads, n, name, sizeof name, P, tr_params_name)) {
        snprintf(what, sizeof what, "the gradient of %s", name);
    }
    if (what[0]) append(out, size, "; first non-finite tensor: %s", what);
    if (first_flagged(bufs, nb, name, sizeof name, P, tr_params_buffer_name)) {
        if (!*model_bad) append(out, size, "; also not finite: buffer %s", name);
        *model_bad = 1;
    }
    tr_free(v);
    return TR_OK;
}
