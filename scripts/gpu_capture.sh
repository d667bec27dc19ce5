#!/usr/bin/env bash
# Capture everything issue 18 needs from one H100/H200 GPU, into $OUT (docs/measure.md,
# "Measuring on an H100/H200"). Run from the repository root, on the GPU machine:
#
#   OUT=/some/dir scripts/gpu_capture.sh            # every stage, in order (~25 min)
#   OUT=/some/dir scripts/gpu_capture.sh env tests  # some stages (each fits a 10-minute slot)
#
# Stages: env tests matmul attention64 attention128 bandwidth train_gpt2 train_llama profile report
# The results store lives in $CAPTURE_HOME (default .gpu_capture/home, git-ignored, so it
# survives between calls on the same machine); after each stage it is copied to
# $OUT/capture/home, with one log per stage in $OUT/capture/logs and a line per stage in
# $OUT/capture/status.txt. Runs from source (PYTHONPATH=src, no install, no network, no
# platformdirs: WILLITSCALE_HOME is set). pytest for the `tests` stage: the machine's, else
# wheels carried in .gpu_wheels (pip download -d .gpu_wheels --only-binary=:all:
# --python-version 3.12 pytest), else the stage says it was skipped.
# The provenance each run stores reads the clocks when the run starts (the GPU may be idle);
# logs/<stage>-clocks.csv samples the SM/memory clocks, power and temperature under load.
# CAPTURE_QUICK=1 shrinks every sweep to seconds (a smoke test of this script on a CPU);
# CAPTURE_GPU names the catalog GPU when nvidia-smi cannot (the profile stage needs one).
set -u
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder the results go to}"
PY=${PYTHON:-python3}
CAPTURE_HOME=${CAPTURE_HOME:-$PWD/.gpu_capture/home}
DEST=$OUT/capture
mkdir -p "$CAPTURE_HOME" "$DEST/logs" "$DEST/topology"
export WILLITSCALE_HOME=$CAPTURE_HOME PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
W() { "$PY" -m willitscale "$@"; }
QUICK=${CAPTURE_QUICK:-0}
if [ "$QUICK" = 1 ]; then
  MATMUL_SIZES=64,128,256,128x256x64 ATT_SEQS=128,256 ATT_ARGS="--hidden 128 --tokens 256 --math-max-seq 128 -w 1 -n 2"
  BW_SIZES=65536,262144,1048576 TRAIN_GPT2="gpt2-tiny 2:64 4:64" TRAIN_OTHER="gpt2-mini 2:64" TRAIN_LLAMA="llama-tiny 2:64"
  TRAIN_ARGS="--steps 2 -w 1"
else
  MATMUL_SIZES="" ATT_SEQS=512,1024,2048,4096,8192,16384,32768,65536,131072
  ATT_ARGS="--hidden 2048 --tokens 16384 --math-max-seq 8192 -w 2 -n 5"
  BW_SIZES=1048576,4194304,16777216,67108864,268435456
  TRAIN_GPT2="gpt2 4:1024 8:1024 16:1024 16:512"
  TRAIN_OTHER="gpt2-medium 4:1024 8:1024 16:512;gpt2-large 4:1024 8:1024 8:512"
  TRAIN_LLAMA="llama-1b 2:2048 4:2048 1:4096 2:4096 1:8192" TRAIN_ARGS="--steps 10 -w 3"
fi

gpu_catalog_name() {  # the catalog GPU of device 0, from nvidia-smi's name
  case "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" in
    *H200*) echo h200 ;; *H100*PCIe*) echo h100-pcie ;; *H100*) echo h100-sxm ;;
    *A100*) echo a100-sxm4-80gb ;; *) echo "" ;;
  esac
}

stage_env() {
  date -u +%FT%TZ; hostname; uname -a; "$PY" -V
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn",
torch.backends.cudnn.version(), "gpus", torch.cuda.device_count()); p = torch.cuda.get_device_properties(0);
print(p)' || true
  local t=$DEST/topology
  nvidia-smi > "$t/nvidia-smi.txt" 2>&1
  nvidia-smi topo -m > "$t/topo-m.txt" 2>&1
  nvidia-smi -q > "$t/nvidia-smi-q.txt" 2>&1
  nvidia-smi -q -d CLOCK,PERFORMANCE,POWER,TEMPERATURE > "$t/clocks-power.txt" 2>&1
  nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.limit,memory.total --format=csv > "$t/gpu-query.csv" 2>&1
  nvidia-smi nvlink -s > "$t/nvlink.txt" 2>&1
  (numactl -H || lscpu) > "$t/numa.txt" 2>&1
  lscpu > "$t/lscpu.txt" 2>&1
  ip -br link > "$t/ip-link.txt" 2>&1
  for f in /sys/class/net/*; do echo "$(basename "$f") speed=$(cat "$f/speed" 2>/dev/null) mtu=$(cat "$f/mtu" 2>/dev/null)"; done > "$t/nics.txt"
  (ibv_devinfo || ls -l /sys/class/infiniband) > "$t/infiniband.txt" 2>&1
  lspci -tv > "$t/lspci-tree.txt" 2>&1
  echo "GPU catalog name: $(gpu_catalog_name)"
}

stage_tests() {
  if ! "$PY" -c 'import pytest' 2>/dev/null; then
    if [ -d .gpu_wheels ]; then
      if "$PY" -m pip install -q --no-index --find-links .gpu_wheels --target .gpu_capture/pylib pytest; then
        export PYTHONPATH=$PYTHONPATH:$PWD/.gpu_capture/pylib
      else  # no pip: pure-Python wheels import from the zip files themselves
        for w in "$PWD"/.gpu_wheels/*.whl; do export PYTHONPATH=$PYTHONPATH:$w; done
      fi
    fi
  fi
  if ! "$PY" -c 'import pytest' 2>/dev/null; then echo "SKIPPED: no pytest here"; return 3; fi
  WILLITSCALE_HOME=$PWD/.gpu_capture/test-home "$PY" -m pytest -q -rs -p no:cacheprovider \
    tests/distributed/test_bench_gpu.py tests/distributed/test_bench_kernels.py
}

stage_matmul() {
  W bench matmul --nproc 1 --sizes "${MATMUL_SIZES:-$("$PY" scripts/gpu_shapes.py all)}" \
    --dtypes bf16,fp8-tensorwise,fp8-rowwise -w 3 -n 10 --label "issue18 matmul"
}

attention() {  # head dim $1
  W bench attention --nproc 1 --backends flash,cudnn,efficient,math --causal both --head-dims "$1" \
    --seq-lens "$ATT_SEQS" $ATT_ARGS --label "issue18 attention d$1"
}
stage_attention64() { attention 64; }
stage_attention128() { attention 128; }

stage_bandwidth() {
  W bench bandwidth --nproc 1 --ops copy,add,gelu,layer_norm,adamw \
    --sizes "$BW_SIZES" --dtype bf16 -w 3 -n 20 --label "issue18 bandwidth"
}

train() {  # model, then "batch:seq" pairs
  local model=$1; shift
  for bs in "$@"; do
    W bench train --nproc 1 --model "$model" --batch "${bs%%:*}" --seq-len "${bs##*:}" --dtype bfloat16 \
      $TRAIN_ARGS --label "issue18 train $model $bs" || echo "FAILED: $model $bs"
  done
}
stage_train_gpt2() {
  train $TRAIN_GPT2
  local IFS=';'
  for spec in $TRAIN_OTHER; do (IFS=' '; train $spec); done
}
stage_train_llama() { train $TRAIN_LLAMA; }

stage_profile() {
  local gpu; gpu=${CAPTURE_GPU:-$(gpu_catalog_name)}
  [ -n "$gpu" ] || { echo "no catalog GPU for this device: give one by hand to calibrate --gpu"; return 1; }
  local ids
  ids=$(W results list --json | "$PY" -c 'import json, sys
runs = json.load(sys.stdin)
print(" ".join(str(r["id"]) for r in runs if r["kind"] in ("matmul", "attention", "bandwidth", "train")
      and r["status"] == "complete" and "issue18" in r["label"]))')
  echo "runs: $ids"
  local profile=$DEST/measured-profile-$gpu.toml steps=$DEST/measured-profile-$gpu-steps.toml
  W calibrate $ids --profile --gpu "$gpu" -o "$profile" || return 1
  if [ -f "$steps" ]; then
    W validate --profile "$profile" --steps "$steps"
    W validate --profile "$profile" --steps "$steps" --json > "$DEST/validate-steps.json"
  else
    echo "no steps file: no one-GPU bench train run with a measured peak among the runs"
  fi
  W results export --format json -o "$DEST/results.json"
}

clock_log() {  # the GPU's clocks, power and temperature every 0.5 s while a stage runs
  command -v nvidia-smi > /dev/null || return 0
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu \
    --format=csv -lms 500 > "$DEST/logs/$1-clocks.csv" 2>&1 &
  CLOCK_PID=$!
}

stage_report() {  # Markdown tables and figures for docs/measure.md and the issue note
  "$PY" scripts/gpu_report.py "$DEST/report" ${CAPTURE_GPU:-$(gpu_catalog_name)}
}

STAGES=${*:-env tests matmul attention64 attention128 bandwidth train_gpt2 train_llama profile report}
for s in $STAGES; do
  start=$(date +%s)
  echo "== $s ($(date -u +%T))"
  CLOCK_PID=""
  clock_log "$s"
  "stage_$s" > "$DEST/logs/$s.log" 2>&1
  rc=$?
  [ -n "$CLOCK_PID" ] && kill "$CLOCK_PID" 2>/dev/null
  echo "$s rc=$rc $(( $(date +%s) - start ))s" | tee -a "$DEST/status.txt"
  tail -5 "$DEST/logs/$s.log"
  rm -rf "$DEST/home" && cp -r "$CAPTURE_HOME" "$DEST/home"
done
