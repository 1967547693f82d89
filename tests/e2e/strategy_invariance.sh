#!/usr/bin/env bash
# Strategy invariance (docs/design.md "Strategy invariance"): the same config trained with
# `cpu`, with `ddp`
# (its sharded update and its all-reduce one) and `sharded` stages 1, 2 and 3 at 2, 3 and 4
# ranks (oversubscribed on small machines) and with `dataparallel` at 2, 3 and 4 replicas
# (threads of one process) ends with the same weights (sharded: read from the shard files of
# its checkpoint) (relative L2 difference of all parameters <= 1e-5) and the same loss at every step (1e-5),
# for an MLP with dropout and a transformer LM, on data whose size does not divide by
# world x batch (uneven shares and an uneven last batch). Validation metrics agree too.
# The CNN runs ddp and dataparallel with sync_batchnorm (global batch statistics, as one process has) and SGD:
# its conv biases feed batch-norm, so their true gradient is zero too (the next note).
# The LM uses Adam's eps 1e-6: the attention key bias has a zero gradient in exact arithmetic
# (softmax ignores a constant added to every key), so what it gets is rounding noise that
# depends on the summation order of the data split, and with eps 1e-8 Adam turns that noise
# into full-size steps (rel. L2 3e-5 after 50 steps, all of it in that bias; PyTorch does the
# same). With 1e-6 the runs agree to 4e-7.
# usage: strategy_invariance.sh TRAINER_BIN PYTHON
set -u
bin="$1"; py="$2"
t="$(mktemp -d /tmp/trainer-inv-XXXXXX)"
trap 'rm -rf "$t"' EXIT
pass=0; fail=0
export TRAINER_COMM_TIMEOUT=120
cat >"$t/mlp.yaml" <<YAML
run: {name: mlp, seed: 3}
model: {name: mlp, params: {layers: [64, 32], dropout: 0.1}}
data: {name: synthetic, params: {samples: 1000, val_samples: 203, features: 16, classes: 5, noise: 1.5}, batch_size: 96}
optimizer: {name: adamw, lr: 0.003}
scheduler: {name: cosine, warmup_steps: 5}
trainer: {max_steps: 50, log_every: 1, grad_clip: 1.0, progress: lines, threads: 1}
YAML
cat >"$t/lm.yaml" <<YAML
run: {name: lm, seed: 5}
model: {name: transformer, params: {mode: lm, d_model: 32, n_head: 2, n_layer: 2, dropout: 0.1}}
data: {name: synthetic, params: {task: lm, samples: 700, val_samples: 101, seq_len: 16, vocab: 24}, batch_size: 36}
optimizer: {name: adamw, lr: 0.002, eps: 1.0e-6}
trainer: {max_steps: 50, log_every: 1, grad_accum: 2, progress: lines, threads: 1}
YAML
cat >"$t/cnn.yaml" <<YAML
run: {name: cnn, seed: 7}
model: {name: cnn, params: {channels: [4, 8], fc: [32, 16], dropout: 0.25}}
data: {name: synthetic, params: {samples: 500, val_samples: 61, shape: [1, 12, 12], classes: 4, noise: 2.0}, batch_size: 48}
optimizer: {name: sgd, lr: 0.05, momentum: 0.9}
trainer: {max_steps: 50, log_every: 1, progress: lines, threads: 1}
YAML
compare() { # compare NAME DIR_A DIR_B
    "$py" "$(dirname "$0")/compare_runs.py" "$2" "$3"
}
for m in mlp lm cnn; do
    opts=""; [ "$m" = cnn ] && opts="strategy.sync_batchnorm=true"
    "$bin" run "$t/$m.yaml" "run.output_dir=$t/cpu" trainer.strategy=cpu >"$t/$m.cpu.log" 2>&1 || { echo "FAIL $m cpu run"; tail -3 "$t/$m.cpu.log"; fail=$((fail + 1)); continue; }
    for s in ddp ddp_buckets ddp_allreduce dataparallel sharded1 sharded2 sharded3; do
        sopts="trainer.strategy=$s"
        # ddp's update sharded over the ranks (the default on CPU), also over buckets of 2 KiB
        # (several per layer: reduce-scatters, slice updates and gathers interleaved), and the
        # all-reduce update (every rank updates all).
        case $s in
        ddp_buckets) sopts="trainer.strategy=ddp strategy.bucket_mb=0.002 strategy.first_bucket_mb=0.001";;
        ddp_allreduce) sopts="trainer.strategy=ddp strategy.shard_update=false";;
        esac
        # Small units, so that stage 3 gathers and releases many times per step.
        case $s in sharded*) sopts="trainer.strategy=sharded strategy.stage=${s#sharded} strategy.unit_mb=0.01";; esac
        for w in 2 3 4; do
            if ! timeout 600 "$bin" run "$t/$m.yaml" "run.output_dir=$t/$s$w" $sopts trainer.devices=$w $opts >"$t/$m.$s$w.log" 2>&1; then
                echo "FAIL $m $s x$w: run failed"; tail -5 "$t/$m.$s$w.log"; fail=$((fail + 1)); continue
            fi
            if out="$(compare "$m x$w" "$t/cpu/$m/0" "$t/$s$w/$m/0")"; then echo "ok   $m, $s x$w vs cpu: $out"; pass=$((pass + 1))
            else echo "FAIL $m, $s x$w vs cpu: $out"; fail=$((fail + 1)); fi
        done
    done
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
