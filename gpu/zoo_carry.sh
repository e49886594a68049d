#!/usr/bin/env bash
# Build .whl/ for the GPU parts `zoo` and `zoo-serving` (gpu/run_all.sh) on a machine that reaches PyPI;
# the GPU machine cannot download. Then carry .whl/ with the run (it prints the size; 64 MiB at most).
#
#   bash gpu/zoo_carry.sh [SITE] [PYTHON_VERSION]   # SITE: where the projects are unpacked (default
#                                                    # .zoo-site); the GPU machine's Python (default 3.12)
set -euo pipefail
cd "$(dirname "$0")/.."
SITE=${1:-.zoo-site}
PYV=${2:-3.12}
pip_() { python -m pip "$@" --quiet --disable-pip-version-check; }
binary() {  # wheels for the GPU machine's Python and platform
    pip_ download --no-deps --only-binary=:all: --python-version "$PYV" --implementation cp \
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 "$@"
}
bash examples/real-kernels/fetch-packages.sh "$SITE" aiter fbgemm sglang vllm
rm -rf .whl/trees .whl/serving && mkdir -p .whl/trees .whl/serving
# aiter and FBGEMM: their packages cut to the files the zoo adapters import (pure Python)
python gpu/zoo_carry.py --site "$SITE" --project aiter --project fbgemm --out .whl/trees
# SGLang and vLLM with transformers 5: one tree (their union), and wheels for the dependencies with compiled code
python gpu/zoo_carry.py --site "$SITE" --project sglang --project vllm --out .whl/serving --into tree \
    --requirements .whl/serving/requirements.txt
binary -d .whl/serving -r .whl/serving/requirements.txt
# transformers 4.57.6 (DeepSeek's act_quant) and compressed-tensors, as docs/zoo.md lists them
pip_ download --no-deps -d .whl compressed-tensors==0.19.0 transformers==4.57.6 loguru pydantic==2.14.4 \
    annotated-types typing-inspection huggingface-hub==0.36.0
binary -d .whl pydantic-core==2.50.5 tokenizers==0.22.1 regex pyyaml
du -sh .whl .whl/trees .whl/serving
