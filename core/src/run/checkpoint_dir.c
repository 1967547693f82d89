/* A run's checkpoints folder (docs/design.md "Checkpoints"): its complete checkpoints newest
 * first, the latest, the checkpoint a path names (a pointer such as `best` followed),
 * pruning, the pointers themselves, and the temporaries a killed save left behind. A
 * checkpoint is complete when its folder has no ".tmp-" in its name (checkpoint.c). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "base/io_error.h"
#include "trainer/checkpoint.h"
#include "trainer/log.h"
#include "trainer/memory.h"

#include "run/checkpoint_impl.h"

typedef struct ckpt_entry {
    char name[256];
    int64_t step;
} ckpt_entry;

/* Newest first: higher step, then later name. */
static int ckpt_cmp(const void *pa, const void *pb) {
    const ckpt_entry *a = pa, *b = pb;
    if (a->step != b->step) return a->step > b->step ? -1 : 1;
    return -strcmp(a->name, b->name);
}

static int is_dir(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* Room for element n of *v (elements of elem bytes, *cap of them, doubling from first). */
static int grow(void **v, int n, int *cap, size_t elem, int first) {
    if (n < *cap) return 0;
    int ncap = *cap ? 2 * *cap : first;
    void *nv = tr_malloc((size_t)ncap * elem);
    if (!nv) return -1;
    if (n) memcpy(nv, *v, (size_t)n * elem);
    tr_free(*v);
    *v = nv;
    *cap = ncap;
    return 0;
}

static int is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Lists the complete checkpoints of dir, sorted newest first; *out is tr_malloc'ed. */
static tr_status list_complete(const char *dir, ckpt_entry **out, int *count) {
    *out = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return tr_error_set(TR_ERR_NOT_FOUND, "%s: no checkpoint directory", dir);
        return tr_error_set(TR_ERR_IO, "%s: cannot open the checkpoint directory: %s", dir, strerror(errno));
    }
    int cap = 0, n = 0;
    ckpt_entry *v = NULL;
    tr_status st = TR_OK;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *nm = de->d_name;
        if (nm[0] == '.' || strstr(nm, ".tmp") || strlen(nm) >= sizeof v->name) continue;
        char sub[PATH_CAP], mp[PATH_CAP], sp[PATH_CAP];
        char ip[PATH_CAP];
        if (ckpt_join(sub, sizeof sub, dir, nm) != TR_OK || !is_dir(sub) ||
            ckpt_join(mp, sizeof mp, sub, MODEL_FILE) != TR_OK || ckpt_join(sp, sizeof sp, sub, STATE_FILE) != TR_OK ||
            ckpt_join(ip, sizeof ip, sub, INDEX_FILE) != TR_OK || !(is_file(mp) || is_file(ip)) || !is_file(sp)) {
            tr_error_clear();
            continue;
        }
        tr_train_state s;
        if (ckpt_read_state(sp, &s) != TR_OK) {
            TR_WARN("checkpoint: skipping %s: %s", sub, tr_error_msg());
            tr_error_clear();
            continue;
        }
        void *grown = v;
        if (grow(&grown, n, &cap, sizeof *v, 16) != 0) {
            st = tr_error_set(TR_ERR_NOMEM, "%s: out of memory listing checkpoints", dir);
            break;
        }
        v = grown;
        snprintf(v[n].name, sizeof v[n].name, "%s", nm);
        v[n].step = s.step;
        n++;
    }
    closedir(d);
    if (st != TR_OK) {
        tr_free(v);
        return st;
    }
    if (n > 1) qsort(v, (size_t)n, sizeof *v, ckpt_cmp);
    *out = v;
    *count = n;
    return TR_OK;
}

tr_status tr_checkpoint_latest(const char *dir, char *out, size_t size) {
    if (!dir || !out || size == 0)
        return tr_error_set(TR_ERR_INVALID, "checkpoint latest: dir and out are required");
    out[0] = '\0';
    ckpt_entry *v;
    int n;
    TR_CHECK(list_complete(dir, &v, &n));
    tr_status st = TR_OK;
    if (n == 0)
        st = tr_error_set(TR_ERR_NOT_FOUND, "%s: no complete checkpoint", dir);
    else if (ckpt_join(out, size, dir, v[0].name) != TR_OK) {
        out[0] = '\0';
        st = tr_error_set(TR_ERR_INVALID, "%s/%s: path does not fit the %zu-byte buffer", dir, v[0].name,
                          size);
    }
    tr_free(v);
    return st;
}

int ckpt_is_file(const char *path) { return is_file(path); }

/* A pointer (`best`, `last`: a symbolic link to a sibling checkpoint) as the checkpoint it names,
 * so that messages name the checkpoint itself; other paths as they are. */
static tr_status follow_pointer(const char *path, char *out, size_t size) {
    struct stat sb;
    char target[256];
    ssize_t n = lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode) ? readlink(path, target, sizeof target - 1) : -1;
    if (n <= 0 || memchr(target, '/', (size_t)n)) {
        if ((size_t)snprintf(out, size, "%s", path) >= size) return tr_error_set(TR_ERR_INVALID, "%s: path too long", path);
        return TR_OK;
    }
    target[n] = '\0';
    const char *slash = strrchr(path, '/');
    int k = slash ? snprintf(out, size, "%.*s/%s", (int)(slash - path), path, target) : snprintf(out, size, "%s", target);
    if (k < 0 || (size_t)k >= size) return tr_error_set(TR_ERR_INVALID, "%s: path too long", path);
    if (stat(out, &sb) != 0)
        return tr_error_set(TR_ERR_NOT_FOUND, "%s points at %s, which is not there (removed by hand?)", path, target);
    return TR_OK;
}

tr_status tr_checkpoint_find(const char *path, char *out, size_t size) {
    char probe[1200], at[PATH_CAP];
    struct stat sb;
    /* RUN/best and RUN/last: the pointers live in RUN/checkpoints/. */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if ((strcmp(base, "best") == 0 || strcmp(base, "last") == 0) && lstat(path, &sb) != 0) {
        snprintf(probe, sizeof probe, "%.*scheckpoints/%s", (int)(base - path), path, base);
        if (lstat(probe, &sb) == 0) path = probe;
    }
    TR_CHECK(follow_pointer(path, at, sizeof at));
    snprintf(probe, sizeof probe, "%s/state.json", at);
    if (is_file(at) || access(probe, F_OK) == 0) { /* a weights file (.safetensors) or a checkpoint folder */
        if ((size_t)snprintf(out, size, "%s", at) >= size) return tr_error_set(TR_ERR_INVALID, "%s: path too long", at);
        return TR_OK;
    }
    if (tr_checkpoint_latest(at, out, size) == TR_OK) return TR_OK;
    snprintf(probe, sizeof probe, "%s/checkpoints", at);
    if (tr_checkpoint_latest(probe, out, size) == TR_OK) return TR_OK;
    return tr_error_set(TR_ERR_NOT_FOUND,
                        "%s: no checkpoint there (give a checkpoint folder such as runs/NAME/0/checkpoints/"
                        "step-00000100, a checkpoints/ folder, a run folder, its best or a .safetensors weights file)",
                        at);
}

/* A "<name>.tmp-<pid>" directory is stale unless process pid is alive (and not us mid-save:
 * saves are synchronous, so one of ours is a leftover too). */
static int stale_tmp(const char *name) {
    const char *t = strstr(name, ".tmp-");
    if (!t) return 0;
    char *end = NULL;
    long pid = strtol(t + 5, &end, 10);
    if (!end || *end || pid <= 0) return 1;
    if (pid == (long)getpid()) return 1;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

tr_status tr_checkpoint_prune(const char *dir, int keep_last) { return ckpt_prune(dir, keep_last, NULL, 0); }

tr_status ckpt_prune(const char *dir, int keep_last, const char *const *keep, int n_keep) {
    if (!dir) return tr_error_set(TR_ERR_INVALID, "checkpoint prune: dir is required");
    if (keep_last < 1)
        return tr_error_set(TR_ERR_INVALID, "%s: keep_last must be at least 1, got %d", dir, keep_last);
    ckpt_entry *v;
    int n;
    TR_CHECK(list_complete(dir, &v, &n));
    tr_status st = TR_OK;
    for (int i = keep_last; i < n && st == TR_OK; i++) {
        int kept = 0;
        for (int k = 0; k < n_keep && !kept; k++) kept = strcmp(keep[k], v[i].name) == 0;
        if (kept) continue;
        char sub[PATH_CAP];
        st = ckpt_join(sub, sizeof sub, dir, v[i].name);
        if (st == TR_OK) st = ckpt_remove_tree(sub, 0);
    }
    tr_free(v);
    if (st != TR_OK) return st;
    TR_CHECK(ckpt_remove_stale(dir, NULL));
    ckpt_fsync_path(dir);
    return TR_OK;
}

tr_status ckpt_link(const char *dir, const char *link, const char *target) {
    char final_path[PATH_CAP], tmp[PATH_CAP], why[256];
    TR_CHECK(ckpt_join(final_path, sizeof final_path, dir, link));
    int k = snprintf(tmp, sizeof tmp, "%s/.%s.tmp-%ld", dir, link, (long)getpid());
    if (k < 0 || (size_t)k >= sizeof tmp) return tr_error_set(TR_ERR_INVALID, "%s: path too long", final_path);
    unlink(tmp);
    if (symlink(target, tmp) != 0)
        return tr_error_set(TR_ERR_IO, "%s: cannot make the link to %s: %s", final_path, target,
                            tr_io_reason(errno, why, sizeof why));
    if (rename(tmp, final_path) != 0) {
        int e = errno;
        unlink(tmp);
        return tr_error_set(TR_ERR_IO, "%s: cannot point it at %s: %s", final_path, target, tr_io_reason(e, why, sizeof why));
    }
    ckpt_fsync_path(dir);
    return TR_OK;
}

tr_status ckpt_remove_stale(const char *dir, int *removed) {
    if (removed) *removed = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return TR_OK;
        return tr_error_set(TR_ERR_IO, "%s: cannot open the checkpoint directory: %s", dir, strerror(errno));
    }
    /* Collect first: removing entries while readdir walks them is unspecified. */
    tr_status st = TR_OK;
    char(*stale)[256] = NULL;
    int ns = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!stale_tmp(de->d_name) || strlen(de->d_name) >= 256) continue;
        void *grown = stale;
        if (grow(&grown, ns, &cap, sizeof *stale, 8) != 0) {
            st = tr_error_set(TR_ERR_NOMEM, "%s: out of memory listing stale temporary files", dir);
            break;
        }
        stale = grown;
        memcpy(stale[ns++], de->d_name, strlen(de->d_name) + 1);
    }
    closedir(d);
    for (int i = 0; i < ns && st == TR_OK; i++) {
        char sub[PATH_CAP];
        st = ckpt_join(sub, sizeof sub, dir, stale[i]);
        if (st == TR_OK) st = ckpt_remove_tree(sub, 0);
        if (st == TR_OK && removed) (*removed)++;
    }
    tr_free(stale);
    return st;
}
