/* A job's model factory. A job that uses a checkpoint folder's weights (eval, predict, embed
 * --checkpoint, export, generate: j->ckpt_path) makes its replicas for that checkpoint, as a
 * resumed run does (tr_model_factory_set_restore): a model built from files rebuilds itself
 * from the copies the checkpoint keeps and reads no initial weights, which the checkpoint's
 * replace (hf_encoder reads nothing of its pretrained folder's weights). A weights file
 * (.safetensors) keeps no copies: the model is then built as a fresh run's, quietly. What a
 * model says when it is built is said once, by rank 0's first replica. */
#include <sys/stat.h>

#include "job.h"
#include "run/model_factory.h"
#include "trainer/comm.h"

tr_status job_make_models(job *j) {
    TR_CHECK(tr_model_factory_create(&j->models, j->model_p, j->model_opts, &j->spec, (uint64_t)j->s.seed));
    model_factory_set_checkpointing(j->models, j->s.act_ckpt);
    struct stat sb;
    int folder = j->ckpt_path[0] && stat(j->ckpt_path, &sb) == 0 && S_ISDIR(sb.st_mode);
    /* What the model says when it is built, rank 0 says (the factory: its first replica), and
     * nothing when a weights file's values replace the initial ones (hf_encoder's "newly
     * initialised" head is not). */
    tr_comm_env ce;
    int rank = tr_comm_env_detect(&ce) == TR_OK ? ce.rank : 0;
    tr_error_clear(); /* a malformed launcher variable is job_plan's to report */
    model_factory_set_quiet(j->models, rank > 0 || (j->ckpt_path[0] && !folder));
    return folder ? tr_model_factory_set_restore(j->models, j->ckpt_path) : TR_OK;
}
