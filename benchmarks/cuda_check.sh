#!/usr/bin/env bash
# The CUDA measurements of the operator, as one script of a few minutes on a machine with a
# GPU (the README's paragraph on the CUDA path): the cuda-marked tests, the benchmark's
# operators_cuda area, the theorem report on CUDA beside the same report on this machine's
# CPU, the training time of the extrapolation experiment's ot-0.3 variant beside alibi's at
# the same settings, and 200 steps of the gpu preset (the last progress line of a run gives
# its training time).
# Everything is written under OUTDIR. It runs from the repository root with python3 and the
# repository on PYTHONPATH, so it needs no install of this package: on a GPU machine that has
# torch and triton but not python-flint or POT, carry their wheels (pip download them for
# that machine's Python into .whl/) and run
#
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl \
#       && PYTHONPATH=/tmp/site benchmarks/cuda_check.sh OUTDIR
#
#   benchmarks/cuda_check.sh OUTDIR
set -euo pipefail
if [ "$#" -ne 1 ]; then
    echo "usage: benchmarks/cuda_check.sh OUTDIR" >&2
    exit 2
fi
case $1 in /*) out=$1 ;; *) out=$PWD/$1 ;; esac
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2> /dev/null || {
    echo "cuda_check.sh: no CUDA device" >&2
    exit 2
}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/device.txt" || true

seconds() { # seconds NAME COMMAND...: run COMMAND, keep its output and its wall time
    local name=$1 start ms rc=0
    shift
    start=$(date +%s%N)
    "$@" > "$out/$name.txt" 2>&1 || rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    printf '%s\t%d.%03d s\texit %d\n' "$name" $((ms / 1000)) $((ms % 1000)) "$rc" \
        | tee -a "$out/times.tsv"
}

seconds pytest_cuda python3 -m pytest -q -m cuda tests/proofs_check
seconds benchmarks_cuda python3 -m benchmarks --only operators_cuda --out "$out/results_cuda.json"
seconds report_cuda_float64 python3 -m proofs_check --device cuda --dtype float64
seconds report_cuda_float32 python3 -m proofs_check --device cuda --dtype float32
seconds report_cpu_float64 python3 -m proofs_check --device cpu --dtype float64
for v in alibi ot-0.3; do
    seconds "train_$v" python3 -m proofs_check.extrapolation run --preset quick --variants "$v" \
        --seeds 0 --steps 200 --longest 256 --device cuda --cache-dir "$out/cache" \
        --out "$out/extrapolation_$v.json"
done
# one run of the gpu preset's model and training length, 200 of its 4000 steps: what a
# step costs, to size that preset's 108 runs against the time a GPU is lent for
seconds train_gpu_preset_alibi python3 -m proofs_check.extrapolation run --preset gpu \
    --variants alibi --seeds 0 --steps 200 --windows 8 --longest 1024 --device cuda \
    --cache-dir "$out/cache" --out "$out/extrapolation_gpu_preset_alibi.json"
cat "$out/times.tsv"
# the training time alone (evaluation excluded): the last progress line of each run
grep -h "step 200/200" "$out"/train_*.txt
