/* Where a run's time goes: per-op wall time of the training thread (trainer.profile).
 *
 *   tr_profile *p;
 *   TR_CHECK(tr_profile_create(&p));
 *   tr_profile_attach(p);                        // this thread records from now
 *   tr_profile_enter("data", "next batch");      // closes the region it was in, opens this one
 *   ...
 *   tr_profile_set_ops(TR_PROFILE_OPS);          // the graph names a region per op it runs
 *   tr_profile_enter("forward", "(before the first op)");
 *   strategy->train_micro(...);                  // forward linear, ..., backward linear, ...
 *   tr_profile_set_ops(TR_PROFILE_OPS_OFF);
 *   tr_profile_enter("strategy", "optim_step");
 *   ...
 *   tr_profile_attach(NULL);                     // closes the last region
 *   tr_profile_write(p, steps, "profile.txt", "profile.json");
 *   tr_profile_destroy(p);
 *
 * Regions are entered, never left: tr_profile_enter ends the region the thread is in and
 * starts the next, so the regions tile the attached time with no gap and no overlap, and
 * their sum is its wall time. A region is a phase and a name; entering the same pair again
 * adds to its total and its count of calls. The trainer enters the loop's regions; while ops
 * are on, the graph enters ("forward", op) at each op and ("backward", op) at each node it
 * differentiates, and ("backward", "(gradient-ready hooks)") around the hooks (ddp's bucket
 * all-reduces are issued there). A strategy may enter regions of its own in phase "strategy".
 *
 * Limits: only the attached thread records, and a region's time is wall time on it. Work of
 * other threads (OpenMP teams included) counts where the attached thread waits for it, so an
 * op's time includes its parallel kernels, and dataparallel's replica threads count in the
 * region that waits for them. An op built from other ops counts as those ops. On a device the
 * graph waits for the device at each op boundary while ops are on, so an op's time includes
 * its kernels (a kernel's failure found there fails the op, as the op's own wait would); the
 * device then idles between ops and the step runs slower than unprofiled. A strategy that
 * queues work without waiting for it waits before it returns while tr_profile_current() is
 * set (single-gpu and ddp do so in optim_step), else the work counts in the next region that
 * waits. */
#ifndef TRAINER_PROFILE_H
#define TRAINER_PROFILE_H

#include "trainer/export.h"

#include <stdint.h>

#include "trainer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_profile tr_profile;

/* One region's total. phase and name are copied, cut to their sizes (at a UTF-8 character's
 * boundary). */
#define TR_PROFILE_PHASE_MAX 16
#define TR_PROFILE_NAME_MAX 48
typedef struct tr_profile_region {
    char phase[TR_PROFILE_PHASE_MAX];
    char name[TR_PROFILE_NAME_MAX];
    int64_t calls;
    double seconds;
} tr_profile_region;

/* Room for this many distinct regions, the last kept for ("other", "(more regions)"), where
 * the new ones count once the others are taken. */
#define TR_PROFILE_MAX_REGIONS 256

TR_API tr_status tr_profile_create(tr_profile **out);
/* Detaches it from the calling thread first when attached there. Destroy a profile on the
 * thread it is attached to, or after that thread detached it. */
TR_API void tr_profile_destroy(tr_profile *p);
/* Makes p the calling thread's profile (NULL: none; ops go off too), ending the region of
 * the one attached before (p itself: nothing changes); p records from its first enter. A
 * profile is attached to one thread at a time. */
TR_API void tr_profile_attach(tr_profile *p);
/* The calling thread's profile, or NULL. */
TR_API tr_profile *tr_profile_current(void);
/* On the calling thread's profile (nothing when none): ends the current region, starts
 * (phase, name). Never allocates; the strings are copied when the region is new. */
TR_API void tr_profile_enter(const char *phase, const char *name);
/* Whether the graph names a region per op on this thread (the trainer turns this on around
 * train_micro only, so validation's forwards stay in their own region): TR_PROFILE_OPS_OFF,
 * TR_PROFILE_OPS (the op's name: "linear") or TR_PROFILE_OPS_SHAPES (with the shapes of its
 * first two inputs: "linear (128, 784) (512, 784)"); and that level while a profile is
 * attached, else off. */
enum { TR_PROFILE_OPS_OFF = 0, TR_PROFILE_OPS = 1, TR_PROFILE_OPS_SHAPES = 2 };
TR_API void tr_profile_set_ops(int level);
TR_API int tr_profile_ops(void);

/* The totals so far (the current region up to now), largest first; n_out their count. The
 * array is p's, valid until the next call or enter. */
TR_API const tr_profile_region *tr_profile_regions(tr_profile *p, int *n_out);
/* Their sum: the attached wall time, in seconds. */
TR_API double tr_profile_seconds(tr_profile *p);
/* Writes the table (txt_path: a text table for people; json_path: one JSON object,
 * {"steps": S, "seconds": T, "regions": [{"phase", "name", "calls", "seconds"}, ...]});
 * either path may be NULL. steps: the optimizer steps the time covers, for the per-step
 * column. */
TR_API tr_status tr_profile_write(tr_profile *p, int64_t steps, const char *txt_path, const char *json_path);
/* One line for a log: "4.31 ms a step over 599 steps: forward 25%, backward 50%, ...; most:
 * backward linear 48%, forward linear 20%, strategy optim_step 9%". */
TR_API void tr_profile_summary(tr_profile *p, int64_t steps, char *out, size_t size);

#ifdef __cplusplus
}
#endif
#endif
