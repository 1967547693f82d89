#!/usr/bin/env bash
# The CUDA plugin's whole host side end to end without a GPU, through the test plugin
# cuda_emu (plugins/devices/cuda built over a CPU emulator of CUDA; kernels.cu compiled as
# C++): device memory through the caching allocator, uploads through the staging buffers,
# every op and the optimizer as kernel launches.
# - auto on 1 emulated GPU picks single-gpu and trains an MLP (GELU, dropout, AdamW, cosine,
#   clipping): weights, every logged loss and the validation metrics within 1e-4 of the cpu
#   strategy's (CUDA's expf/erff/tanhf and the tree sums differ from the CPU's by ulps);
# - ddp on 2 emulated GPUs (one process each, buckets staged through the host over shm):
#   within 1e-4 of cpu; over nccl_emu (buckets all-reduced in device memory) equal to shm's
#   (MLP, and the CNN with sync_batchnorm); dataparallel with 2 replicas on one emulated GPU (devices [0, 0]):
#   within 1e-4 of dataparallel's CPU replicas;
# - dataparallel single-process multi-device over nccl_emu (2 and 3 GPUs, the CNN with
#   sync_batchnorm, a resumed run): equal to its host-memory path; a replica whose NCCL join
#   fails stops the run at once; nccl_emu refused on
#   devices [0, 0] and on CPU replicas;
# - sharded stage 3 on 2 emulated GPUs (units gathered and reduce-scattered through the host
#   over shm): within 1e-4 of cpu; over nccl_emu (in device memory): equal to shm's;
# - a CNN (conv2d, batch-norm, ReLU, max-pool, dropout; SGD) under ddp on 2 with
#   sync_batchnorm (the statistics' sums downloaded, reduced over the ranks and uploaded)
#   within 1e-5 of cpu's single process (the global batch's statistics), over nccl_emu equal
#   to shm's;
# - a model that does not fit the device stops naming the device and the memory (exit 1);
# - a single-gpu step waits for the device once a micro-batch (the emulator counts).
# Single-gpu on the CNN and the transformers, and the one-GPU testing modes against
# single-gpu: gpu_train.sh (e2e_gpu_train_emu runs it on this emulator).
# usage: cuda_emu.sh TRAINER_BIN CUDA_EMU_PLUGIN_DIR
set -u
bin="$1"; emu="$2"; here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
py=/usr/bin/python3
t="$(mktemp -d /tmp/trainer-cuda-emu-XXXXXX)"
trap 'rm -rf "$t"' EXIT
export TRAINER_PLUGIN_PATH="$emu"
export TRAINER_NCCL_EMU_STREAM=1 # nccl_emu: the ranks must hand over their device's compute stream
unset CUDA_VISIBLE_DEVICES TRAINER_CUDA_EMU_GPUS TRAINER_CUDA_EMU_MIB
mlp_device_yaml "$t/mlp.yaml" cuda_emu 1

out="$(TRAINER_CUDA_EMU_GPUS=1 timeout 120 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/gpu" 2>&1)"; rc=$?
out2="$(timeout 120 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/cpu" trainer.accelerator=cpu 2>&1)"; rc2=$?
if [ $rc = 0 ] && [ $rc2 = 0 ] && grep -q "strategy single-gpu chosen: auto: found 1 GPU (id 0)" <<<"$out" &&
   grep -q "strategy single-gpu (cuda_emu:0, CUDA emulator 0)" <<<"$out" && grep -q "done: 30 steps" <<<"$out" &&
   cmp_out="$(cmp_runs "$t/gpu/m/0" "$t/cpu/m/0" --tol 1e-4 2>&1)"; then
    ok "single-gpu on the emulated CUDA device under auto: 30 steps within 1e-4 of cpu ($cmp_out)"
else bad "single-gpu on cuda_emu vs cpu" "rc=$rc rc2=$rc2" "${cmp_out:-}" "$out" "$(tail -3 <<<"$out2")"; fi

out="$(TRAINER_CUDA_EMU_GPUS=2 timeout 180 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/ddp" strategy.first_bucket_mb=0.001 \
       strategy.bucket_mb=0.002 2>&1)"; rc=$?
if [ $rc = 0 ] && grep -q "strategy ddp chosen: auto: found 2 GPUs" <<<"$out" &&
   grep -q "one GPU each: this rank cuda_emu:0, [0-9]* buckets" <<<"$out" && cmp_out="$(cmp_runs "$t/ddp/m/0" "$t/cpu/m/0" --tol 1e-4 2>&1)"; then
    ok "ddp on 2 emulated CUDA devices (one process each): within 1e-4 of cpu ($cmp_out)"
else bad "ddp on cuda_emu vs cpu" "rc=$rc" "${cmp_out:-}" "$out"; fi

# The same over the nccl backend (nccl_emu: the emulated NCCL): buckets all-reduced in the
# devices' gradient buffers, nothing staged; with 2 ranks the sums are the same bits as shm's.
out="$(TRAINER_CUDA_EMU_GPUS=2 timeout 180 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/ddp_nccl" strategy.first_bucket_mb=0.001 \
       strategy.bucket_mb=0.002 strategy.backend=nccl_emu 2>&1)"; rc=$?
if [ $rc = 0 ] && ! grep -q "nccl_emu: rank" <<<"$out" && grep -q "2 ranks over nccl_emu, one GPU each: this rank cuda_emu:0, [0-9]* buckets all-reduced in device memory" <<<"$out" &&
   cmp_out="$(cmp_runs "$t/ddp_nccl/m/0" "$t/ddp/m/0" --tol 0 2>&1)"; then
    ok "ddp on 2 emulated CUDA devices over nccl_emu (in device memory): equal to ddp over shm ($cmp_out)"
else bad "ddp over nccl_emu vs shm" "rc=$rc" "${cmp_out:-}" "$out"; fi

# sharded (ZeRO stage 3) on the emulated devices: staged over shm, then in device memory.
for b in shm nccl_emu; do
    out="$(TRAINER_CUDA_EMU_GPUS=2 timeout 180 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/z3_$b" trainer.strategy=sharded \
           strategy.stage=3 strategy.unit_mb=0.001 strategy.backend=$b 2>&1)"; rc=$?
    how="staged through host memory"; ref="$t/cpu/m/0"; tol=1e-4
    [ $b = nccl_emu ] && how="gathered and reduce-scattered in device memory" && ref="$t/z3_shm/m/0" && tol=0
    if [ $rc = 0 ] && grep -q "ZeRO stage 3, 2 ranks over $b, one GPU each: this rank cuda_emu:0, [0-9]* units $how" <<<"$out" &&
       cmp_out="$(cmp_runs "$t/z3_$b/m/0" "$ref" --tol $tol 2>&1)"; then
        ok "sharded stage 3 on 2 emulated CUDA devices over $b ($how): within $tol of ${ref#$t/} ($cmp_out)"
    else bad "sharded stage 3 on cuda_emu over $b" "rc=$rc" "${cmp_out:-}" "$out"; fi
done

# dataparallel with 2 replicas on one emulated GPU (devices [0, 0], the testing mode): two
# opened devices in one process, each replica's thread bound to its own.
out="$(TRAINER_CUDA_EMU_GPUS=1 timeout 180 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/dp" trainer.strategy=dataparallel \
       "trainer.devices=[0, 0]" 2>&1)"; rc=$?
out2="$(timeout 120 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/dpc" trainer.strategy=dataparallel trainer.accelerator=cpu \
        trainer.devices=2 2>&1)"; rc2=$?
if [ $rc = 0 ] && [ $rc2 = 0 ] && grep -q "dataparallel (2 GPU replicas on cuda_emu:0, cuda_emu:0" <<<"$out" &&
   cmp_out="$(cmp_runs "$t/dp/m/0" "$t/dpc/m/0" --tol 1e-4 2>&1)"; then
    ok "dataparallel with 2 replicas on 1 emulated CUDA device: within 1e-4 of 2 CPU replicas ($cmp_out)"
else bad "dataparallel on cuda_emu [0, 0] vs CPU replicas" "rc=$rc rc2=$rc2" "${cmp_out:-}" "$out" "$(tail -3 <<<"$out2")"; fi

# dataparallel single-process multi-device over nccl_emu: a rank per replica's thread, the
# gradients reduced onto the primary and the parameters broadcast in device memory, against
# the same replicas through host memory (backend host). The emulator sums in rank order, the
# host in replica order: the same bits, for 2 and 3 replicas. Stopped after 10 steps and
# resumed (sync() uploads to every replica), it ends where the straight run does. The
# replicas leave NCCL together (its finalize completes only once every rank leaves: nccl_emu
# says when a rank waited for the others until its limit).
for n in 2 3; do
    for b in host nccl_emu; do
        out="$(TRAINER_CUDA_EMU_GPUS=$n timeout 180 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/dp${n}_$b" \
               trainer.strategy=dataparallel trainer.devices=$n strategy.backend=$b 2>&1)"
        echo $? >"$t/dp${n}_$b.rc"; printf '%s\n' "$out" >"$t/dp${n}_$b.log"
    done
    if [ "$(cat "$t/dp${n}_host.rc")" = 0 ] && [ "$(cat "$t/dp${n}_nccl_emu.rc")" = 0 ] &&
       grep -q "reduced and replicated through host memory)" "$t/dp${n}_host.log" &&
       grep -q "dataparallel ($n GPU replicas on cuda_emu:0, cuda_emu:1.*, reduced and broadcast over nccl_emu in device memory)" \
           "$t/dp${n}_nccl_emu.log" && ! grep -q "nccl_emu: rank" "$t/dp${n}_nccl_emu.log" &&
       cmp_out="$(cmp_runs "$t/dp${n}_nccl_emu/m/0" "$t/dp${n}_host/m/0" --tol 0 2>&1)"; then
        ok "dataparallel, $n replicas on $n emulated GPUs over nccl_emu (device memory): equal to host memory's ($cmp_out), leaving NCCL together"
    else bad "dataparallel on $n GPUs over nccl_emu vs host" "${cmp_out:-}" "$(tail -3 "$t/dp${n}_nccl_emu.log")" \
             "$(tail -3 "$t/dp${n}_host.log")"; fi
done
(TRAINER_CUDA_EMU_GPUS=2 TRAINER_FAULT_KILL_AT_STEP=15 exec timeout 180 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/dp_res" \
    trainer.strategy=dataparallel trainer.devices=2 strategy.backend=nccl_emu >"$t/dp_res1.log" 2>&1); rc=$?
out2="$(TRAINER_CUDA_EMU_GPUS=2 timeout 180 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/dp_res" trainer.strategy=dataparallel \
        trainer.devices=2 strategy.backend=nccl_emu 2>&1)"; rc2=$?
a="$(ls -d "$t"/dp_res/m/0/checkpoints/step-* 2>/dev/null | tail -1)"; b="$(ls -d "$t"/dp2_nccl_emu/m/0/checkpoints/step-* | tail -1)"
if [ $rc != 0 ] && [ $rc2 = 0 ] && grep -q "resuming from .*step-00000010" <<<"$out2" && [ -n "$a" ] &&
   [ "$(basename "$a")" = "$(basename "$b")" ] && cmp -s "$a/model.safetensors" "$b/model.safetensors" &&
   cmp -s "$a/optimizer.safetensors" "$b/optimizer.safetensors"; then
    ok "dataparallel over nccl_emu killed at step 15 and resumed from step 10: the straight run's $(basename "$a"), byte for byte"
else bad "dataparallel over nccl_emu resumed" "rc=$rc rc2=$rc2" "$(tail -2 "$t/dp_res1.log")" "$(tail -3 <<<"$out2")"; fi
# A replica whose NCCL join fails: the other replica leaves its own join at once (not at the
# deadline; NCCL's blocking join would wait for ever) and the run fails naming the cause.
start=$(date +%s)
out="$(TRAINER_CUDA_EMU_GPUS=3 TRAINER_NCCL_EMU_INIT_FAIL=1 TRAINER_COMM_TIMEOUT=60 timeout 120 "$bin" run "$t/mlp.yaml" \
       "run.output_dir=$t/dp_initfail" trainer.strategy=dataparallel trainer.devices=3 strategy.backend=nccl_emu 2>&1)"; rc=$?
secs=$(( $(date +%s) - start ))
if [ $rc = 1 ] && [ "$secs" -lt 30 ] && grep -q "emulated ncclCommInitRank failed on rank 1" <<<"$out"; then
    ok "dataparallel over nccl_emu, replica 1's NCCL join failing: the run stops in ${secs}s: $(grep -o 'replica 1 .*' <<<"$out" | head -1 | cut -c1-120)"
else bad "dataparallel with a failing NCCL join (rc=$rc, ${secs}s)" "$out"; fi
# nccl takes one replica per GPU: the testing mode [0, 0] with it named is refused, naming the
# way that works; on the CPU a device backend is refused by the probe.
out="$(TRAINER_CUDA_EMU_GPUS=1 timeout 60 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/dp_twice" trainer.strategy=dataparallel \
       "trainer.devices=[0, 0]" strategy.backend=nccl_emu 2>&1)"; rc=$?
if [ $rc = 1 ] && grep -q "strategy.backend: nccl_emu takes one replica per GPU, and GPU 0 is listed twice (the one-GPU testing mode goes through host memory: backend host)" <<<"$out"; then
    ok "dataparallel over nccl_emu on devices [0, 0] refused: $(grep -o 'strategy.backend: nccl_emu takes[^(]*' <<<"$out")"
else bad "dataparallel over nccl_emu on [0, 0]" "rc=$rc" "$out"; fi
out="$(timeout 60 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/dp_cpu_nccl" trainer.strategy=dataparallel trainer.devices=2 \
       trainer.accelerator=cpu strategy.backend=nccl_emu 2>&1)"; rc=$?
if [ $rc = 1 ] && grep -q "strategy.backend: nccl_emu joins GPU replicas; CPU replicas reduce in this process's memory (auto or host)" <<<"$out"; then
    ok "dataparallel on CPU replicas with a GPU backend refused: $(grep -o 'strategy.backend: nccl_emu joins[^;]*' <<<"$out")"
else bad "dataparallel on the CPU with backend nccl_emu" "rc=$rc" "$out"; fi
# CPU replicas are worker threads: a device id listed twice means nothing there, refused.
out="$(timeout 60 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/dp_cpu_twice" trainer.strategy=dataparallel \
       trainer.accelerator=cpu "strategy.device_ids=[1, 1]" 2>&1)"; rc=$?
if [ $rc = 1 ] && grep -q "strategy.device_ids: device 1 is listed twice" <<<"$out"; then
    ok "dataparallel on CPU replicas with a device listed twice refused: $(grep -o 'strategy.device_ids: .*' <<<"$out")"
else bad "dataparallel on the CPU with device_ids [1, 1]" "rc=$rc" "$out"; fi

out="$(TRAINER_CUDA_EMU_GPUS=1 TRAINER_CUDA_EMU_MIB=1 timeout 60 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/big" \
       "model.params.layers=[1024, 1024]" 2>&1)"; rc=$?
if [ $rc = 1 ] && grep -q "cuda_emu:0: out of device memory" <<<"$out"; then
    ok "a model larger than device memory: $(grep -o 'cuda_emu:0: out of device memory[^(]*' <<<"$out" | head -1)"
else bad "model larger than the emulated GPU" "rc=$rc" "$out"; fi

cnn_device_yaml "$t/cnn.yaml" cuda_emu 1
timeout 240 "$bin" run "$t/cnn.yaml" "run.output_dir=$t/cnn_cpu" trainer.accelerator=cpu >"$t/cnn_cpu.log" 2>&1 ||
    bad "the CNN on cpu failed" "$(tail -3 "$t/cnn_cpu.log")"
out="$(TRAINER_CUDA_EMU_GPUS=2 timeout 240 "$bin" run "$t/cnn.yaml" "run.output_dir=$t/cnn_ddp" strategy.sync_batchnorm=true 2>&1)"; rc=$?
if [ $rc = 0 ] && grep -q "strategy ddp chosen: auto: found 2 GPUs" <<<"$out" && grep -q "done: 12 steps" <<<"$out" &&
   cmp_out="$(cmp_runs "$t/cnn_ddp/c/0" "$t/cnn_cpu/c/0" --tol 1e-5 2>&1)"; then
    ok "the CNN under ddp on 2 emulated CUDA devices with sync_batchnorm: within 1e-5 of cpu's one process ($cmp_out)"
else bad "cnn ddp sync_batchnorm on cuda_emu vs cpu" "rc=$rc" "${cmp_out:-}" "$out"; fi
out="$(TRAINER_CUDA_EMU_GPUS=2 timeout 240 "$bin" run "$t/cnn.yaml" "run.output_dir=$t/cnn_ddp_nccl" strategy.sync_batchnorm=true \
       strategy.backend=nccl_emu 2>&1)"; rc=$?
if [ $rc = 0 ] && grep -q "all-reduced in device memory" <<<"$out" && grep -q "done: 12 steps" <<<"$out" &&
   cmp_out="$(cmp_runs "$t/cnn_ddp_nccl/c/0" "$t/cnn_ddp/c/0" --tol 0 2>&1)"; then
    ok "the CNN under ddp over nccl_emu with sync_batchnorm (buffers broadcast on the device): equal to shm's ($cmp_out)"
else bad "cnn ddp over nccl_emu vs shm" "rc=$rc" "${cmp_out:-}" "$out"; fi
# The CNN's batch-norm running statistics (buffers) broadcast with the parameters, and its
# sums reduced across the replicas' threads (sync_batchnorm), under dataparallel over nccl_emu.
for b in host nccl_emu; do
    TRAINER_CUDA_EMU_GPUS=2 timeout 240 "$bin" run "$t/cnn.yaml" "run.output_dir=$t/cnn_dp_$b" trainer.strategy=dataparallel \
        trainer.devices=2 strategy.sync_batchnorm=true strategy.backend=$b >"$t/cnn_dp_$b.log" 2>&1
    echo $? >"$t/cnn_dp_$b.rc"
done
if [ "$(cat "$t/cnn_dp_host.rc")" = 0 ] && [ "$(cat "$t/cnn_dp_nccl_emu.rc")" = 0 ] &&
   grep -q "broadcast over nccl_emu in device memory, sync batch-norm" "$t/cnn_dp_nccl_emu.log" &&
   cmp_out="$(cmp_runs "$t/cnn_dp_nccl_emu/c/0" "$t/cnn_dp_host/c/0" --tol 0 2>&1)"; then
    ok "the CNN under dataparallel over nccl_emu with sync_batchnorm: equal to host memory's ($cmp_out)"
else bad "cnn dataparallel over nccl_emu vs host" "${cmp_out:-}" "$(tail -3 "$t/cnn_dp_nccl_emu.log")"; fi
# A bf16-mixed run's checkpoint (fp32 master weights) resumed on the CPU in fp32.
out="$(TRAINER_CUDA_EMU_GPUS=1 timeout 120 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/bfr" trainer.precision=bf16-mixed \
       trainer.max_steps=10 2>&1)"; rc=$?
out2="$(TRAINER_CUDA_EMU_GPUS=1 timeout 120 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/bfr" trainer.accelerator=cpu \
        trainer.max_steps=20 2>&1)"; rc2=$?
if [ $rc = 0 ] && [ $rc2 = 0 ] && grep -q "resuming from .*step-00000010" <<<"$out2" && grep -q "done: 20 steps" <<<"$out2"; then
    ok "a bf16-mixed checkpoint resumed on the CPU in fp32: $(grep -o 'resuming from.*' <<<"$out2")"
else bad "bf16-mixed checkpoint resumed in fp32 on the CPU" "rc=$rc rc2=$rc2" "$out" "$out2"; fi
# trainer plan says the precision.
out="$(TRAINER_CUDA_EMU_GPUS=1 timeout 60 "$bin" plan "$t/mlp.yaml" trainer.precision=bf16-mixed 2>&1)"; rc=$?
json="$(TRAINER_CUDA_EMU_GPUS=1 timeout 60 "$bin" plan "$t/mlp.yaml" trainer.precision=bf16-mixed --json 2>&1)"
if [ $rc = 0 ] && grep -q "^  precision bf16-mixed: the GEMMs on bf16 operands" <<<"$out" &&
   grep -q '"precision": "bf16-mixed"' <<<"$json"; then
    ok "trainer plan names the precision: $(grep '^  precision' <<<"$out")"
else bad "trainer plan with bf16-mixed" "rc=$rc" "$out" "$json"; fi
# trainer.precision bf16-mixed where it cannot run: a GPU without bf16 tensor cores (the
# emulator claiming compute capability 7.5), and the CPU. Both stop before training, naming why.
out="$(TRAINER_CUDA_EMU_GPUS=1 TRAINER_CUDA_EMU_CC=7 timeout 60 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/bf_old" \
       trainer.precision=bf16-mixed 2>&1)"; rc=$?
if [ $rc = 1 ] && grep -q "trainer.precision bf16-mixed: cuda_emu:0: bf16 GEMMs need compute capability 8.0" <<<"$out" &&
   [ ! -e "$t/bf_old/m/0/checkpoints" ]; then
    ok "bf16-mixed on a GPU older than compute capability 8.0 refused: $(grep -o 'cuda_emu:0: bf16 GEMMs.*' <<<"$out")"
else bad "bf16-mixed on compute capability 7" "rc=$rc" "$out"; fi
# On the CPU it needs AVX512-BF16 (tests/e2e/cpu_bf16.sh trains there); without, refused.
out="$(TRAINER_CPU_NO_BF16=1 TRAINER_CUDA_EMU_GPUS=1 timeout 60 "$bin" run "$t/mlp.yaml" "run.output_dir=$t/bf_cpu" \
       trainer.precision=bf16-mixed trainer.accelerator=cpu 2>&1)"; rc=$?
if [ $rc = 1 ] && grep -q "command line:1:19: trainer.precision: bf16-mixed on the CPU (strategy cpu.*without AVX512-BF16" <<<"$out"; then
    ok "bf16-mixed on a CPU without AVX512-BF16 refused: $out"
else bad "bf16-mixed on a CPU without AVX512-BF16" "rc=$rc" "$out"; fi
# How often a single-gpu step makes the host wait for the device's queue (the emulator counts
# the downloads and syncs that had work queued before them): once a micro-batch, for its loss
# and in the last one every parameter's gradient sum with it. Not once per parameter for the
# norm, nor for cross-entropy's targets and embedding's ids (checked in the batch's host
# memory), nor for the seed gradient, nor after the update (the host goes on to the next
# batch while it runs). Counted as the difference between runs of 8 and 4 steps. And the
# batch's inputs (x and y) are copied beside the compute stream, into the input half the step
# before last used, while the previous step's update runs (the emulator checks that no work
# queued after the mark a copy waits for used its memory).
transformer_device_yaml "$t/lm.yaml" "$t/lm" cuda_emu lm
# waits NAME CONFIG STEPS [overrides...]: "WAITS COPIES_BESIDE" of a single-gpu run, or "rc=N".
waits() {
    local name="$1" cfg="$2" n="$3"; shift 3
    local o; o="$(TRAINER_CUDA_EMU_GPUS=1 TRAINER_CUDA_EMU_WAITS=1 timeout 120 "$bin" run "$cfg" \
                  "run.output_dir=$t/$name$n" trainer.strategy=single-gpu trainer.max_steps="$n" "$@" 2>&1)" ||
        { echo "rc=$?"; return; }
    sed -n 's/^cuda_emu: cuda_emu:0: the host waited for queued work \([0-9]*\) times; \([0-9]*\) copies beside the compute stream$/\1 \2/p' <<<"$o"
}
for w in "lm $t/lm.yaml 1" "mlp $t/mlp.yaml 1" "mlp_accum $t/mlp.yaml 2 trainer.grad_accum=2 data.batch_size=16"; do
    set -- $w
    name="$1" cfg="$2" per="$3"; shift 3
    r4="$(waits "$name" "$cfg" 4 "$@")"; r8="$(waits "$name" "$cfg" 8 "$@")"
    w4="${r4% *}" c4="${r4#* }" w8="${r8% *}" c8="${r8#* }"
    if [[ "$r4" =~ ^[0-9]+\ [0-9]+$ && "$r8" =~ ^[0-9]+\ [0-9]+$ ]] && [ $(( (w8 - w4) / 4 )) = "$per" ] &&
       [ $(( (w8 - w4) % 4 )) = 0 ] && [ $(( c8 - c4 )) = $(( 4 * 2 * per )) ]; then
        ok "single-gpu ($name) waits for the device $per time(s) a step ($w4 waits in 4 steps, $w8 in 8); its inputs copied beside the compute stream ($c4 copies in 4 steps, $c8 in 8)"
    else bad "single-gpu ($name): waits a step, expected $per; inputs beside, expected $(( 2 * per )) a step" "4 steps: $r4" "8 steps: $r8"; fi
done

# trainer.profile on a device: the graph waits for the device at each op boundary (so an op's
# time holds its kernels), the table counts the MLP's 3 linear layers a step over the 7 steps
# after the first, and the losses are the unprofiled run's.
r8="$(waits mlp "$t/mlp.yaml" 8)"; p8="$(waits mlp_prof "$t/mlp.yaml" 8 trainer.profile=true)"
pj="$t/mlp_prof8/m/0/profile.json"
if [[ "$p8" =~ ^[0-9]+\ [0-9]+$ && "$r8" =~ ^[0-9]+\ [0-9]+$ ]] && [ "${p8% *}" -gt $(( ${r8% *} + 7 * 6 )) ] &&
   grep -q '"phase": "forward", "name": "linear", "calls": 21,' "$pj" &&
   grep -q '"phase": "backward", "name": "linear", "calls": 21,' "$pj" &&
   diff <(grep -o '"loss": [^,]*' "$t/mlp8/m/0/metrics.jsonl") <(grep -o '"loss": [^,]*' "$t/mlp_prof8/m/0/metrics.jsonl") >/dev/null; then
    ok "single-gpu profiled: waits at op boundaries (${p8% *} waits against ${r8% *}), 3 linear layers a step, the same losses"
else bad "single-gpu profiled" "waits: $p8 against $r8" "$(head -c 600 "$pj" 2>&1)"; fi
# A failed kernel stops a profiled run as it stops an unprofiled one (the profile's waits at op
# boundaries hand the device's error to the graph): the 41st product fails (step 5's).
for prof in false true; do
    o="$(TRAINER_CUDA_EMU_GPUS=1 TRAINER_CUDA_EMU_FAIL_GEMM=41 timeout 120 "$bin" run "$t/mlp.yaml" \
         "run.output_dir=$t/fail_$prof" trainer.strategy=single-gpu trainer.max_steps=10 trainer.profile=$prof 2>&1)"; rc=$?
    if [ "$rc" = 1 ] && grep -q "injected: TRAINER_CUDA_EMU_FAIL_GEMM=41" <<<"$o" && ! grep -q "^done:" <<<"$o" &&
       ! grep -q '"step": [6-9]' "$t/fail_$prof/m/0/metrics.jsonl"; then
        ok "a failed kernel stops the run (profile $prof), before step 6"
    else bad "a failed kernel stops the run (profile $prof)" "exit $rc" "$(tail -3 <<<"$o")"; fi
done
finish
