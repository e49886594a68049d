#!/usr/bin/env bash
# Every GPU check and benchmark of fp8check, in one call on a CUDA machine.
#
#   bash gpu/run_all.sh            # prints a log; writes gpu/RESULTS.md-ready text to $OUT
#   bash gpu/run_all.sh recipes tests-gpu    # only the parts named (KNOWN below)
#
# The machine needs torch, numpy and ml_dtypes; wheels of anything else
# (array-api-compat, torchao, gfloat, more_itertools) are installed from
# .whl/ when that folder is present (see gpu/README.md). Each part runs
# under its own time limit, and one failing part does not stop the others.
set -uo pipefail
cd "$(dirname "$0")/.."
KNOWN=" environment suite tests-gpu recipes triton-faithful ops-table approx-ops zoo zoo-serving mma-tiles gemm training training-dist huge audit-bench "  # in the order they run
PARTS=" $* "
for p in $PARTS; do
    if [[ "$KNOWN" != *" $p "* ]]; then
        echo "error: unknown part $p (parts:${KNOWN% })" >&2
        exit 2
    fi
done

OUT=${OUT:-gpu/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1

if compgen -G ".whl/*.whl" >/dev/null; then
    site=$(mktemp -d)
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .whl/*.whl \
        && export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
# Package trees cut to the files the zoo's adapters import (gpu/zoo_carry.py): aiter, FBGEMM, SGLang, vLLM.
for tree in .whl/trees/*/; do
    [ -d "$tree" ] && export PYTHONPATH="$PWD/$tree${PYTHONPATH:+:$PYTHONPATH}"
done
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

part() {  # part NAME LIMIT_SECONDS COMMAND...
    local name=$1 limit=$2; shift 2
    if [ "$PARTS" != "  " ] && [[ "$PARTS" != *" $name "* ]]; then return 0; fi
    echo
    echo "===== $name ====="
    local start=$SECONDS
    timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.log"
    local rc=${PIPESTATUS[0]}
    echo "----- $name: exit $rc in $((SECONDS - start)) s"
    echo "$name exit=$rc seconds=$((SECONDS - start))" >>"$OUT/summary.txt"
}

: >"$OUT/summary.txt"
part environment 60 python3 -c '
import json, fp8check.results as r
print(json.dumps(r.environment(), indent=1))'
part suite 330 python3 gpu/suite.py --out "$OUT/suite"
part tests-gpu 450 python3 -m pytest -p fp8check.plugin -m gpu -v -rxX --durations=20 -p no:cacheprovider tests
# Last but the benchmark: compiling torchao's Triton kernels is slow.
part recipes 300 python3 gpu/recipes.py --max-examples 10 --json "$OUT/recipes.json"
# The faithful Triton interpreter's sm90 target against compiled Triton: every
# float32 input per format and direction, quantizer kernels (< 3 min).
part triton-faithful 240 python3 gpu/triton_faithful.py --json "$OUT/triton-faithful.json"
# The faithful interpreter's float ops (fp8check.triton.ops) against compiled sm90: every op a quantizer
# uses x special values, compiled here and interpreted in the three bracket modes (< 3 min on an H200).
# Commit $OUT/ops-table.json.gz as gpu/results/ops-table.json.gz (tests/triton_faithful/test_ops_table.py).
part ops-table 420 python3 gpu/ops_table.py --json "$OUT/ops-table.json.gz"
# NVIDIA's approximate instructions (rcp/sqrt/rsqrt/ex2/lg2.approx, div.full.f32) over every mantissa at
# every exponent, and 2^30 random divisions, against fp8check.triton.nvidia_approx (alone in its call: about
# 5 minutes, most of it the CPU checking). Commit $OUT/approx-ops.json as gpu/results/approx-ops.json
# (tests/triton_faithful/test_nvidia_approx.py) and, when its log says 0 mismatches, $OUT/sm90-rcp.npz as
# fp8check/triton/data/sm90-rcp.npz (the full reciprocal table).
part approx-ops 560 python3 gpu/approx_ops.py --out "$OUT"
# Third-party packages' FP8 quantizers (fp8check.zoo): compiled sm90 against the faithful sm90
# interpreter byte for byte on the same inputs, then each entry against its claim on the GPU.
# Alone in its call: up to 9 minutes (the interpreter side runs on this host's CPU; ZOO_BUDGET=SECONDS
# stops starting entries sooner, so that zoo and zoo-serving fit one call).
part zoo 560 python3 gpu/zoo.py --max-examples 5 --budget "${ZOO_BUDGET:-500}" --json "$OUT/zoo.json"
# The same for SGLang and vLLM, whose transformers 5 is carried apart (.whl/serving: the tree
# gpu/zoo_carry.py --into tree cuts, and the wheels of their dependencies with compiled code).
serving_site=$(mktemp -d)
if { [ "$PARTS" = "  " ] || [[ "$PARTS" == *" zoo-serving "* ]] || [[ "$PARTS" == *" gemm "* ]]; } && compgen -G ".whl/serving/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$serving_site" .whl/serving/*.whl
fi
part zoo-serving 560 env PYTHONPATH="$PWD/.whl/serving/tree:$serving_site:$PYTHONPATH" \
    python3 gpu/zoo.py --max-examples 5 --budget "${ZOO_BUDGET:-500}" --package sglang --package vllm --json "$OUT/zoo-serving.json"
# One tl.dot per program (mma.sync fp16/bf16 and fp8 through fp16, wgmma fp8 and fp16; K chained) compiled
# against fp8check.matmul.tensorcore's models, 2^20 elements per configuration, NaN by class (< 2 min).
# Commit $OUT/mma-tiles.json and .npz under gpu/results (tests/test_mma_tiles_gpu_results.py reads them).
part mma-tiles 300 python3 gpu/mma_tiles.py --out "$OUT"
# Verbatim Triton FP8 GEMMs (examples/real-kernels' sm90 ones, and the tests' planted block kernel as a
# control) compiled against the faithful sm90 interpreter, bit for bit on the same codes and scales (issue 34,
# item 5). Needs the projects on PYTHONPATH (SGLang's tree from .whl/serving, transformers 4.57, DeepSeek-V3's
# inference/kernel.py as deepseek_v3_inference/kernel.py: fetch-packages.sh deepseek); an absent one is listed
# as skipped. Commit $OUT/gemm.json as gpu/results/gemm.json (tests/test_gemm_gpu_results.py reads it).
# (SGLang's tree last: transformers 4.57 of .whl/ first, whose w8a8_block_fp8_matmul_triton 5.17 no longer has)
# GEMM_LIMIT=SECONDS raises the part's limit (default 420) for a call that runs nothing else.
part gemm "${GEMM_LIMIT:-420}" env PYTHONPATH="$PYTHONPATH:$PWD/.whl/serving/tree:$serving_site" python3 gpu/gemm.py --json "$OUT/gemm.json" \
    --dump "$OUT/gemm-diverging.npz" ${GEMM_ARGS:-}
# fp8check.training with torchao's real float8 kernels: step conformance, loss
# parity against BF16 and the CPU-emulated goldens, the device's golden file.
part training 300 python3 gpu/training.py --out "$OUT/training"
# fp8check.training.distributed over NCCL (needs 2 GPUs: skips on one): FSDP2 with
# and without torchao's float8 all-gather, tensor parallelism, 10 steps each,
# every shard's cast and every rank's loss against the single-device run.
part training-dist 540 python3 gpu/training_distributed.py --out "$OUT/training-dist"
# Huge calls by default on the device: a Triton cast with int32 offsets must fail past
# 2^31 elements (wrong codes, or a device fault attributed to that call; checked last, in a
# child process), its int64 twin and a torch rowwise quantizer conform (issue 21; < 2 min).
part huge 500 python3 gpu/huge.py --json "$OUT/huge.json"
# The audit's speed on a quiet many-core machine (no GPU needed; the CI
# machine has 2 cores): audit throughput against a raw read, same run.
part audit-bench 150 python3 benchmarks/audit_throughput.py --size-gb 4 --shards 8 --jobs 8
# What comes back is committed: no path of the machine it ran on (this checkout's root becomes '.').
find "$OUT" -type f \( -name '*.log' -o -name '*.json' -o -name '*.txt' \) -exec sed -i "s#$PWD/##g; s#$PWD#.#g" {} +
echo
echo "===== summary ====="
cat "$OUT/summary.txt"
# The device tool brings back a few files only: pack the JSON results into one.
tar -czf "$OUT/results.tar.gz" -C "$OUT" --exclude results.tar.gz . 2>/dev/null || true
