#!/usr/bin/env bash
# The installed SDK, used the way a third party would, away from this source tree:
# - `cmake --install` into a temporary prefix gives the binary, libtrainer with the ABI major in
#   its SONAME, the headers and the docs they cite, the shipped plugins, trainerConfig.cmake
#   and trainer.pc; the installed `trainer` finds its own plugins (none from the build tree).
# - The examples in docs/examples, copied to a temporary folder, build against that prefix
#   alone: the local_sgd strategy and the bf16_compress comm hook with find_package(trainer)
#   (CMake), the npy dataset with
#   pkg-config (make); no include path points into the source tree; warnings are errors.
# - local_sgd with k = 1 trains to ddp's weights, losses and validation (SGD with momentum,
#   2 and 3 ranks, relative L2 <= 1e-5); with k = 5 it learns the task and is another
#   model; killed after step 25 and restarted (max_restarts) from step 18's checkpoint it
#   ends with the uninterrupted run's weights (its models are averaged before every
#   checkpoint: the settle entry).
# - bf16_compress, a comm hook, sums ddp's (all-reduce and sharded update) and sharded's
#   gradient buckets in bf16: each loss curve within 4e-3 (one bf16 rounding of the loss) of
#   the fp32 sums', and not equal.
# - npy trains to the same weights as csv on the same numbers (float32 or float64 features,
#   int64 or int32 labels); a file that is not .npy, a truncated one, one whose shape
#   overflows, mismatched rows, a label out of range and a validation split of another
#   sample shape (the core checks this for every dataset) are refused naming the file.
# - A plugin built against the installed SDK but claiming the next ABI major is refused by
#   `trainer plugins --check` with both versions in the message.
# usage: sdk.sh BUILD_DIR SOURCE_DIR PYTHON [CMAKE]
set -u
build="$1"; src="$2"; py="$3"; cmake="${4:-cmake}"; here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
t="$(mktemp -d /tmp/trainer-sdk-XXXXXX)"
trap 'rm -rf "$t"' EXIT
export TRAINER_COMM_TIMEOUT=120
p="$t/prefix"

# ---- install ----
if "$cmake" --install "$build" --prefix "$p" >"$t/install.log" 2>&1; then ok "cmake --install into $p"
else bad "cmake --install" "$(tail -5 "$t/install.log")"; finish; exit 1; fi
T="$p/bin/trainer"
lib="$(find "$p" -name 'libtrainer.so.*.*' | head -1)"
abi_major="$(sed -n 's/^#define TR_ABI_MAJOR \([0-9]*\)$/\1/p' "$p/include/trainer/runtime.h")"
abi_minor="$(sed -n 's/^#define TR_ABI_MINOR \([0-9]*\)$/\1/p' "$p/include/trainer/runtime.h")"
soname="$(readelf -d "$lib" 2>/dev/null | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')"
if [ -n "$abi_major" ] && [ "$soname" = "libtrainer.so.$abi_major" ]; then ok "SONAME $soname carries the ABI major"
else bad "SONAME" "lib=$lib soname=$soname abi major=$abi_major"; fi
missing=""
for f in bin/trainer include/trainer/trainer.h include/trainer/strategy.h share/doc/trainer/abi.md; do [ -e "$p/$f" ] || missing="$missing $f"; done
for f in trainerConfig.cmake trainerConfigVersion.cmake trainerTargets.cmake TrainerPlugin.cmake trainer.pc; do
    [ -n "$(find "$p" -name "$f")" ] || missing="$missing $f"
done
for plug in tr_model_mlp tr_data_csv tr_comm_shm tr_strategy_cpu tr_strategy_ddp tr_strategy_sharded; do
    [ -n "$(find "$p" -path "*/trainer/plugins/*" -name "$plug.so")" ] || missing="$missing $plug.so"
done
if [ -z "$missing" ]; then ok "installed: binary, headers, package files, shipped plugins"
else bad "missing from the install:$missing"; fi
if out="$("$T" plugins 2>&1)" && grep -q "strategy  *ddp .*$p/" <<<"$out" && ! grep -q "$build" <<<"$out"; then
    ok "the installed trainer lists its own plugins, none from the build tree"
else bad "installed trainer plugins" "$out"; fi

# ---- build the examples out of tree ----
mkdir -p "$t/src"
cp -r "$src/docs/examples/local_sgd" "$src/docs/examples/bf16_compress" "$src/docs/examples/npy_dataset" "$t/src/"
for ex in local_sgd bf16_compress; do
    rm -rf "$t/src/$ex/build"
    # Only the prefix is searched: no user package registry, no system pkg-config folders.
    if "$cmake" -S "$t/src/$ex" -B "$t/src/$ex/build" -G "Unix Makefiles" -DCMAKE_PREFIX_PATH="$p" \
           -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF \
           -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >"$t/cmake.log" 2>&1 &&
       "$cmake" --build "$t/src/$ex/build" >>"$t/cmake.log" 2>&1 && [ -f "$t/src/$ex/build/$ex.so" ] &&
       grep -q "^trainer_DIR:PATH=$p/" "$t/src/$ex/build/CMakeCache.txt"; then
        ok "$ex builds with find_package(trainer), found in the prefix"
    else bad "$ex build" "$(tail -8 "$t/cmake.log")" "$(grep trainer_DIR "$t/src/$ex/build/CMakeCache.txt")"; fi
done
pcpath="$(dirname "$(find "$p" -name trainer.pc | head -1)")"
if make -s -C "$t/src/npy_dataset" PKG_CONFIG_LIBDIR="$pcpath" PKG_CONFIG_PATH= CFLAGS="-O2 -Wall -Wextra -Werror" \
       >"$t/make.log" 2>&1 && [ -f "$t/src/npy_dataset/npy.so" ]; then
    ok "npy builds with pkg-config against the prefix"
else bad "npy build" "$(tail -8 "$t/make.log")"; fi
leaks="$(grep -rlE -- "$src|$build" "$t/src/local_sgd/build/CMakeFiles" 2>/dev/null | grep -E 'flags.make|build.make|link.txt' ;
         PKG_CONFIG_LIBDIR="$pcpath" PKG_CONFIG_PATH= pkg-config --cflags --libs trainer | grep -E -- "$src|$build")"
if [ -z "$leaks" ]; then ok "no compile or link flag points into the source or build tree"
else bad "flags into the source or build tree" "$leaks"; fi
if out="$("$T" plugins --check "$t/src/local_sgd/build/local_sgd.so" 2>&1)" &&
   grep -q "strategy local_sgd 1.0.0" <<<"$out" && grep -q "ABI $abi_major.$abi_minor" <<<"$out"; then
    ok "trainer plugins --check local_sgd.so: descriptor read"
else bad "check local_sgd.so" "$out"; fi

# ---- local SGD vs ddp ----
cp "$src/docs/examples/local_sgd/local_sgd.yaml" "$t/src/local_sgd/"
cfg="$t/src/local_sgd/local_sgd.yaml"
run() { # run NAME OVERRIDES...: a run of the example config that must succeed
    local name="$1"; shift
    timeout 300 "$T" run "$cfg" "run.output_dir=$t/runs/$name" trainer.max_steps=50 trainer.log_every=1 \
        trainer.threads=1 data.params.samples=4096 "$@" >"$t/$name.log" 2>&1 ||
        { bad "$name: run failed" "$(tail -3 "$t/$name.log")"; return 1; }
}
if out="$("$T" plan "$cfg" 2>&1)" && grep -Eq '^\* local_sgd +2 +64 ' <<<"$out" && grep -q "named in trainer.strategy" <<<"$out"; then
    ok "trainer plan estimates the out-of-tree strategy (2 ranks, 64 samples each)"
else bad "plan of local_sgd" "$out"; fi
for w in 2 3; do
    run ddp$w trainer.strategy=ddp 'strategy={}' trainer.devices=$w
    run k1_$w strategy.k=1 trainer.devices=$w
    if out="$(cmp_runs "$t/runs/k1_$w/local_sgd/0" "$t/runs/ddp$w/local_sgd/0" --tol 1e-5)"; then
        ok "local_sgd k=1 x$w equals ddp x$w: $out"
    else bad "local_sgd k=1 x$w vs ddp" "$out"; fi
done
run k5 strategy.k=5 checkpoint.every_n_steps=9
acc="$(sed -n 's/.*final validation accuracy: \([0-9.]*\)%.*/\1/p' "$t/k5.log")"
if out="$(cmp_runs "$t/runs/k5/local_sgd/0" "$t/runs/ddp2/local_sgd/0" --weights-only)"; then
    bad "local_sgd k=5 equals ddp: it did not train locally" "$out"
elif "$py" -c "import sys; sys.exit(0 if float('${acc:-0}') >= 70 else 1)"; then
    ok "local_sgd k=5 learns (validation accuracy $acc%) and is another model than ddp"
else bad "local_sgd k=5 accuracy ${acc:-none}" "$(tail -3 "$t/k5.log")"; fi
# Resumed from step 18's checkpoint: without settle it would hold rank 0's model three steps
# after the last averaging (at 15) and rank 1 would continue from it (relative L2 5e-2
# measured); with settle the models are averaged at every checkpoint (and the next averaging
# comes k steps later, in both runs alike).
TRAINER_FAULT_KILL_AT_STEP=25 TRAINER_FAULT_KILL_RANK=1 run k5r strategy.k=5 checkpoint.every_n_steps=9 trainer.max_restarts=1
if out="$(cmp_runs "$t/runs/k5r/local_sgd/0" "$t/runs/k5/local_sgd/0" --weights-only --tol 1e-6)" &&
   grep -q "resuming from .*step-00000018" "$t/k5r.log"; then
    ok "local_sgd k=5 killed at step 25, restarted from step 18, ends as the uninterrupted run: $out"
else bad "local_sgd restart" "$out" "$(grep -E 'resuming|exited|killed' "$t/k5r.log" | head -3)"; fi

# ---- the bf16_compress comm hook vs fp32 sums ----
# The same runs with their gradient buckets summed in bf16: every path of the engine (ddp's
# all-reduce, ddp's sharded update, sharded stage 3) takes the hook; each loss curve stays
# within one bf16 rounding of the fp32 one (2^-9 of the first losses, near 2: 4e-3), and
# differs from it (the hook ran). Buckets of 0.05 MiB: 3 of them, each at its own offset.
cp "$src/docs/examples/bf16_compress/bf16_compress.yaml" "$t/src/bf16_compress/"
cfg="$t/src/bf16_compress/bf16_compress.yaml"
hook_case() { # hook_case NAME OVERRIDES...: fp32 sums, then the hook's
    local n="$1" out; shift
    run "${n}_fp32" "$@" strategy.comm_hook=none && run "${n}_bf16" "$@" || return
    if ! grep -q "comm hook bf16_compress" "$t/${n}_bf16.log"; then bad "$n: no comm hook in the log" "$(head -5 "$t/${n}_bf16.log")"
    elif out="$(cmp_runs "$t/runs/${n}_bf16/bf16_compress/0" "$t/runs/${n}_fp32/bf16_compress/0" --losses-only --tol 4e-3)" &&
         ! cmp_runs "$t/runs/${n}_bf16/bf16_compress/0" "$t/runs/${n}_fp32/bf16_compress/0" --losses-only --tol 0 >/dev/null; then
        ok "$n with comm_hook bf16_compress: the loss curve within bf16 rounding of fp32 sums: $out"
    else bad "$n: bf16_compress vs fp32 sums" "$out"; fi
}
hook_case ddp_all_reduce trainer.strategy=ddp strategy.shard_update=false strategy.bucket_mb=0.05 strategy.first_bucket_mb=0.05
hook_case ddp_shard_update trainer.strategy=ddp strategy.bucket_mb=0.05 strategy.first_bucket_mb=0.05
hook_case sharded_stage3 trainer.strategy=sharded strategy.stage=3 strategy.unit_mb=0.05

# ---- npy vs csv ----
d="$t/src/npy_dataset"
"$py" - "$d" <<'PY'
import sys
import numpy as np
d = sys.argv[1]
r = np.random.default_rng(3)
y = r.integers(0, 4, 1200)
x = (r.normal(size=(4, 12))[y] + 1.5 * r.normal(size=(1200, 12))).astype(np.float32)
np.save(f"{d}/x.npy", x)
np.save(f"{d}/y.npy", y)                       # int64
np.save(f"{d}/x64.npy", x.astype(np.float64))
np.save(f"{d}/y32.npy", y.astype(np.int32))
with open(f"{d}/data.csv", "w") as f:
    f.write(",".join(f"f{i}" for i in range(12)) + ",label\n")
    for xi, yi in zip(x, y):
        f.write(",".join(repr(float(v)) for v in xi) + f",{yi}\n")
np.save(f"{d}/y_short.npy", y[:-1])
np.save(f"{d}/y_big.npy", np.where(np.arange(1200) == 7, 9, y))
open(f"{d}/text.npy", "w").write("not numpy\n")
b = open(f"{d}/x.npy", "rb").read()
open(f"{d}/trunc.npy", "wb").write(b[: len(b) // 2])
hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }".ljust(117) + "\n"
open(f"{d}/huge.npy", "wb").write(b"\x93NUMPY\x01\x00" + bytes([len(hdr), 0]) + hdr.encode() + b"\0" * 64)
np.save(f"{d}/xv_wide.npy", np.zeros((50, 13), np.float32))
np.save(f"{d}/yv.npy", np.zeros(50, np.int64))
PY
cat >"$d/base.yaml" <<YAML
plugins: [.]
run: {name: n, seed: 5}
model: {name: mlp, params: {layers: [32]}}
data: {name: npy, params: {x: x.npy, y: y.npy}, batch_size: 50, val_fraction: 0.25}
optimizer: {name: adamw, lr: 0.003}
trainer: {max_epochs: 3, log_every: 1, progress: lines, threads: 1}
YAML
nrun() { local name="$1"; shift; timeout 120 "$T" run "$d/base.yaml" "run.output_dir=$t/runs/$name" "$@" >"$t/$name.log" 2>&1 ||
         { bad "$name: run failed" "$(tail -3 "$t/$name.log")"; return 1; }; }
nrun npy && nrun csv data.name=csv 'data.params={path: data.csv, normalize: none}' &&
    nrun npy64 data.params.x=x64.npy data.params.y=y32.npy
acc="$(sed -n 's/.*final validation accuracy: \([0-9.]*\)%.*/\1/p' "$t/npy.log")"
if out="$(cmp_runs "$t/runs/npy/n/0" "$t/runs/csv/n/0" --tol 0)" &&
   out2="$(cmp_runs "$t/runs/npy64/n/0" "$t/runs/npy/n/0" --tol 0)"; then
    ok "npy (f32/i64 and f64/i32) trains to csv's weights on the same numbers, bit for bit (val accuracy $acc%)"
else bad "npy vs csv" "${out:-}" "${out2:-}"; fi
refused() { # refused NAME REGEX OVERRIDES...
    local name="$1" re="$2"; shift 2
    local out; out="$(timeout 60 "$T" run "$d/base.yaml" "run.output_dir=$t/runs/bad" "$@" 2>&1)"
    if [ $? -ne 0 ] && grep -Eq -- "$re" <<<"$out"; then ok "npy refuses $name"
    else bad "npy $name" "$out"; fi
}
refused "a text file" "text.npy: not a .npy file" data.params.x=text.npy
refused "a truncated file" "trunc.npy: truncated: 14400 elements of 4 bytes" data.params.x=trunc.npy
refused "mismatched rows" "y_short.npy: 1199 rows, but .*x.npy has 1200" data.params.y=y_short.npy
refused "a shape whose size overflows" "huge.npy: 'shape' too large" data.params.x=huge.npy
refused "a validation split of another shape" "validation split's samples \(13 x values, 1 y values\) do not match the train split's \(12, 1\)" \
    data.params.val_x=xv_wide.npy data.params.val_y=yv.npy
refused "a label out of range" "y_big.npy: row 7: label 9 outside \[0, 4\)" data.params.y=y_big.npy data.params.classes=4

# ---- a plugin for another ABI major ----
cat >"$t/src/next_major.c" <<'C'
#include <trainer/model.h>
static const tr_model_ops ops;
static const tr_plugin_desc desc = {.abi_major = TR_ABI_MAJOR + 1, .abi_minor = 0, .struct_size = sizeof desc,
                                    .kind = TR_PLUGIN_MODEL, .name = "next_major", .ops = &ops, .ops_size = sizeof ops};
TR_PLUGIN_DEFINE(desc)
C
if cc -std=c11 -fPIC -shared -fvisibility=hidden $(PKG_CONFIG_LIBDIR="$pcpath" PKG_CONFIG_PATH= pkg-config --cflags trainer) \
      -o "$t/src/next_major.so" "$t/src/next_major.c" >"$t/cc.log" 2>&1; then
    out="$("$T" plugins --check "$t/src/next_major.so" 2>&1)"; rc=$?
    if [ $rc -ne 0 ] && grep -q "built for plugin ABI $((abi_major + 1)).0, this trainer has ABI $abi_major.$abi_minor" <<<"$out"; then
        ok "a plugin for ABI $((abi_major + 1)).0 is refused with both versions"
    else bad "next-major plugin" "rc=$rc" "$out"; fi
else bad "next-major fixture build" "$(cat "$t/cc.log")"; fi
finish
