/* Every rank's view of a step that may have failed on some: the ranks agree on the outcome
 * so that none goes on alone. */
#include "run/run_agree.h"

#include <stdio.h>

tr_status run_agree(job *j, tr_status st, const char *what, const char *others) {
    char msg[1024] = "";
    if (st != TR_OK) snprintf(msg, sizeof msg, "%s", tr_error_msg());
    double failed = st != TR_OK;
    if (j->sops->all_sum) {
        tr_status a = j->sops->all_sum(j->strat, &failed, 1);
        if (a != TR_OK) return st != TR_OK ? tr_error_set(st, "%s", msg) : a;
    }
    if (failed == 0) return TR_OK;
    return st != TR_OK ? tr_error_set(st, "%s", msg) : tr_error_set(TR_ERR_IO, "%s: %s", what, others);
}
