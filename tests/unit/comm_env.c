/* Unit tests of the communicator's environment detection (trainer/torchrun, mpirun, srun,
 * none, bad values) and of the bf16/f16 conversions and reduction kernels the backends use. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "trainer/comm.h"
#include "trainer/half.h"

static const char *const vars[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TRAINER_JOB_ID",
                                   "MASTER_PORT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                   "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_NAMESPACE",
                                   "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
                                   "SLURM_STEP_TASKS_PER_NODE", "SLURM_JOB_ID", "SLURM_STEP_ID",
                                   "TRAINER_COMM_TIMEOUT", "GROUP_WORLD_SIZE", "TORCHELASTIC_RUN_ID",
                                   "TORCHELASTIC_RESTART_COUNT", "SLURM_NODEID", "SLURM_NNODES", "SLURM_STEP_NUM_NODES", "SLURM_STEP_NUM_TASKS",
                                   "PMIX_RANK"};

static void clear(void) {
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

static void test_env(void) {
    tr_comm_env e;
    clear();
    CHECK(tr_comm_env_detect(&e) == TR_OK && e.rank == 0 && e.size == 1 && e.local_size == 1 &&
              strncmp(e.job_id, "single-", 7) == 0 && e.timeout_s == 0,
          "no launcher: one rank (%s)", e.job_id);
    setenv("RANK", "3", 1);
    setenv("WORLD_SIZE", "8", 1);
    setenv("LOCAL_RANK", "1", 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    setenv("TRAINER_JOB_ID", "123-ab.0", 1);
    setenv("TRAINER_COMM_TIMEOUT", "30", 1);
    CHECK(tr_comm_env_detect(&e) == TR_OK && e.rank == 3 && e.size == 8 && e.local_rank == 1 && e.local_size == 2 &&
              strcmp(e.job_id, "trainer-123-ab.0") == 0 && e.timeout_s == 30,
          "torchrun-style variables: %s", tr_error_msg());
    unsetenv("TRAINER_JOB_ID");
    setenv("MASTER_PORT", "29500", 1);
    CHECK(tr_comm_env_detect(&e) == TR_OK && strcmp(e.job_id, "torchrun-29500") == 0, "torchrun job id %s", e.job_id);
    /* torchrun's restart is a new rendezvous; its nodes (GROUP_WORLD_SIZE) give the ranks per
     * node when LOCAL_WORLD_SIZE is missing, and contradict it when it says one node. */
    setenv("TORCHELASTIC_RUN_ID", "none", 1);
    setenv("TORCHELASTIC_RESTART_COUNT", "2", 1);
    CHECK(tr_comm_env_detect(&e) == TR_OK && strcmp(e.job_id, "torchrun-29500-none-r2") == 0, "torchrun restart %s",
          e.job_id);
    setenv("GROUP_WORLD_SIZE", "4", 1);
    unsetenv("LOCAL_WORLD_SIZE");
    unsetenv("LOCAL_RANK");
    CHECK(tr_comm_env_detect(&e) == TR_OK && e.local_size == 2 && e.local_rank == 1, "torchrun nodes: %d/%d %s",
          e.local_rank, e.local_size, tr_error_msg());
    setenv("LOCAL_WORLD_SIZE", "8", 1);
    CHECK(tr_comm_env_detect(&e) == TR_ERR_INVALID &&
              strstr(tr_error_msg(), "GROUP_WORLD_SIZE=4 nodes, but LOCAL_WORLD_SIZE puts all 8 ranks on this one"),
          "torchrun nodes against LOCAL_WORLD_SIZE: %s", tr_error_msg());
    unsetenv("GROUP_WORLD_SIZE");
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    setenv("RANK", "8", 1);
    CHECK(tr_comm_env_detect(&e) == TR_ERR_INVALID && strstr(tr_error_msg(), "rank 8 is not below the world size 8"),
          "rank >= size refused: %s", tr_error_msg());
    setenv("RANK", "x1", 1);
    CHECK(tr_comm_env_detect(&e) == TR_ERR_INVALID && strstr(tr_error_msg(), "RANK='x1'"), "bad RANK: %s",
          tr_error_msg());
    unsetenv("WORLD_SIZE");
    setenv("RANK", "1", 1);
    CHECK(tr_comm_env_detect(&e) == TR_ERR_INVALID && strstr(tr_error_msg(), "RANK is set without WORLD_SIZE"),
          "half a pair: %s", tr_error_msg());
    clear();
    setenv("OMPI_COMM_WORLD_RANK", "2", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
    setenv("PMIX_NAMESPACE", "prterun-host-1@1", 1);
    CHECK(tr_comm_env_detect(&e) == TR_OK && e.rank == 2 && e.size == 4 && e.local_rank == 0 && e.local_size == 2 &&
              strcmp(e.job_id, "ompi-prterun-host-1_1") == 0,
          "mpirun: %s / %s", tr_error_msg(), e.job_id);
    clear();
    setenv("SLURM_PROCID", "5", 1);
    setenv("SLURM_NTASKS", "6", 1);
    setenv("SLURM_LOCALID", "2", 1);
    setenv("SLURM_STEP_TASKS_PER_NODE", "3(x2)", 1);
    setenv("SLURM_JOB_ID", "777", 1);
    CHECK(tr_comm_env_detect(&e) == TR_OK && e.rank == 5 && e.size == 6 && e.local_rank == 2 && e.local_size == 3 &&
              strcmp(e.job_id, "slurm-777.0") == 0,
          "srun: %s / %s", tr_error_msg(), e.job_id);
    /* Uneven nodes: this node's own count; several nodes without any count are refused. */
    setenv("SLURM_STEP_TASKS_PER_NODE", "2(x2),1", 1);
    setenv("SLURM_NODEID", "2", 1);
    setenv("SLURM_PROCID", "4", 1);
    setenv("SLURM_NTASKS", "5", 1);
    setenv("SLURM_LOCALID", "0", 1);
    CHECK(tr_comm_env_detect(&e) == TR_OK && e.local_size == 1, "srun uneven: %d %s", e.local_size, tr_error_msg());
    setenv("SLURM_NODEID", "1", 1);
    setenv("SLURM_PROCID", "3", 1);
    setenv("SLURM_LOCALID", "1", 1);
    CHECK(tr_comm_env_detect(&e) == TR_OK && e.local_size == 2, "srun uneven node 1: %d %s", e.local_size, tr_error_msg());
    unsetenv("SLURM_STEP_TASKS_PER_NODE");
    setenv("SLURM_NNODES", "3", 1);
    CHECK(tr_comm_env_detect(&e) == TR_ERR_INVALID && strstr(tr_error_msg(), "3 nodes (SLURM_STEP_NUM_NODES or SLURM_NNODES), "
                                                                             "but all 5 tasks (SLURM_NTASKS)"),
          "srun nodes without counts: %s", tr_error_msg());
    /* A step of 2 tasks in an allocation of 5: the step's. */
    unsetenv("SLURM_NNODES");
    setenv("SLURM_STEP_NUM_TASKS", "2", 1);
    setenv("SLURM_PROCID", "1", 1);
    setenv("SLURM_LOCALID", "1", 1);
    CHECK(tr_comm_env_detect(&e) == TR_OK && e.size == 2 && e.local_size == 2, "srun step: %d/%d %s", e.size, e.local_size,
          tr_error_msg());
    clear();
    setenv("PMIX_RANK", "0", 1);
    CHECK(tr_comm_env_detect(&e) == TR_ERR_INVALID && strstr(tr_error_msg(), "PMIX_RANK is set"), "PMIx alone: %s",
          tr_error_msg());
    clear();
    setenv("SLURM_PROCID", "5", 1);
    setenv("SLURM_NTASKS", "6", 1);
    setenv("TRAINER_COMM_TIMEOUT", "-1", 1);
    CHECK(tr_comm_env_detect(&e) == TR_ERR_INVALID && strstr(tr_error_msg(), "TRAINER_COMM_TIMEOUT"), "bad timeout");
    clear();
}

static void test_half(void) {
    CHECK(tr_f32_to_f16(1.0f / 3) == 0x3555, "1/3 -> %04x", tr_f32_to_f16(1.0f / 3));
    CHECK(tr_f32_to_f16(65504.0f) == 0x7bff && tr_f32_to_f16(65519.0f) == 0x7bff, "largest finite");
    CHECK(tr_f32_to_f16(65520.0f) == 0x7c00 && tr_f32_to_f16(-1e9f) == 0xfc00, "overflow rounds to inf");
    CHECK(tr_f32_to_f16(ldexpf(1, -24)) == 0x0001 && tr_f32_to_f16(ldexpf(1, -25)) == 0x0000 &&
              tr_f32_to_f16(3 * ldexpf(1, -25)) == 0x0002,
          "subnormals round to nearest even");
    CHECK(tr_f32_to_f16(-0.0f) == 0x8000 && (tr_f32_to_f16(NAN) & 0x7e00) == 0x7e00, "-0 and NaN");
    CHECK(tr_f32_to_f16(1.0f + ldexpf(1, -11)) == 0x3c00 && tr_f32_to_f16(1.0f + 3 * ldexpf(1, -11)) == 0x3c02,
          "ties to even");
    CHECK(tr_f32_to_bf16(1.0f / 3) == 0x3eab && tr_bf16_to_f32(0x3f80) == 1.0f, "bf16 1/3 and 1");
    CHECK((tr_f32_to_bf16(NAN) & 0x7fc0) == 0x7fc0 && tr_f32_to_bf16(INFINITY) == 0x7f80, "bf16 NaN and inf");
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) { /* every non-NaN half survives a round trip */
        float f = tr_f16_to_f32((uint16_t)h);
        if (!isnan(f) && tr_f32_to_f16(f) != h) bad++;
        if (!isnan(tr_bf16_to_f32((uint16_t)h)) && tr_f32_to_bf16(tr_bf16_to_f32((uint16_t)h)) != h) bad++;
    }
    CHECK(bad == 0, "%d 16-bit values do not round-trip", bad);
}

static void test_kernels(void) {
    float a[5] = {1, -2, 3, 4, 5}, b[5] = {2, 2, -3, 4, 0.5f}, d[5];
    tr_reduce2(d, a, b, 5, TR_F32, TR_RED_SUM);
    CHECK(d[0] == 3 && d[2] == 0 && d[4] == 5.5f, "f32 sum");
    tr_reduce2(d, a, b, 5, TR_F32, TR_RED_MAX);
    CHECK(d[1] == 2 && d[2] == 3, "f32 max");
    tr_reduce2(d, a, b, 5, TR_F32, TR_RED_PROD);
    CHECK(d[1] == -4 && d[3] == 16, "f32 prod");
    int32_t i[2] = {INT32_MAX, -5}, j[2] = {1, 3};
    tr_reduce_into(i, j, 2, TR_I32, TR_RED_SUM);
    CHECK(i[0] == INT32_MIN && i[1] == -2, "i32 sum wraps");
    uint8_t u[2] = {200, 3}, v[2] = {100, 4};
    tr_reduce_into(u, v, 2, TR_U8, TR_RED_SUM);
    CHECK(u[0] == 44 && u[1] == 7, "u8 sum wraps");
    int64_t s[2] = {-7, 9};
    tr_scale_div(s, 2, TR_I64, 2);
    CHECK(s[0] == -3 && s[1] == 4, "i64 avg truncates");
    uint16_t h[2] = {tr_f32_to_f16(1.5f), tr_f32_to_bf16(3)}, g[2] = {tr_f32_to_f16(2.25f), tr_f32_to_bf16(-1)};
    tr_reduce_into(h, g, 1, TR_F16, TR_RED_SUM);
    tr_reduce_into(h + 1, g + 1, 1, TR_BF16, TR_RED_MIN);
    CHECK(tr_f16_to_f32(h[0]) == 3.75f && tr_bf16_to_f32(h[1]) == -1, "f16 sum, bf16 min");
    CHECK(strcmp(tr_comm_kind_name(TR_COMM_REDUCE_SCATTER), "reduce_scatter") == 0 &&
              strcmp(tr_red_op_name(TR_RED_AVG), "avg") == 0,
          "names");
}

int main(void) {
    test_env();
    test_half();
    test_kernels();
    return test_finish();
}
