#!/usr/bin/env bash
# Unpack the projects whose kernels this repository checks into DIR, one folder per project
# (put DIR/<project> on PYTHONPATH to check that project's kernels; nothing is installed into
# your environment, and no file of a project is changed).
#
#   bash fetch-packages.sh DIR [project ...]     # projects: aiter fbgemm sglang transformers vllm deepseek
#
# Versions are the ones fp8check.zoo's entries were checked with.
set -euo pipefail
DIR=${1:?usage: fetch-packages.sh DIR [aiter fbgemm sglang transformers vllm deepseek]}
shift
PROJECTS=${*:-aiter fbgemm sglang transformers vllm deepseek}
mkdir -p "$DIR/wheels"
cd "$DIR"
pip_() { python -m pip "$@" --quiet --disable-pip-version-check; }
for p in $PROJECTS; do
    case $p in
    aiter)  # AMD aiter: a 40 MB py3-none-any wheel; `import aiter` needs ROCm, its Triton modules do not
        pip_ download --no-deps -d wheels amd-aiter==0.1.7.post2.dev18
        rm -rf aiter && mkdir aiter && unzip -q wheels/amd_aiter-0.1.7.post2.dev18-*.whl -d aiter ;;
    fbgemm)  # FBGEMM GenAI: a 34 MB wheel with a CUDA library; only its Python files are used here
        pip_ download --no-deps -d wheels fbgemm-gpu-genai==1.9.0
        rm -rf fbgemm && mkdir fbgemm && unzip -q wheels/fbgemm_gpu_genai-1.9.0-*.whl -d fbgemm ;;
    sglang)  # SGLang pins a CUDA torch: its wheel unpacked, its small dependencies beside it
        pip_ download --no-deps -d wheels sglang==0.5.23
        rm -rf sglang && mkdir sglang && unzip -q wheels/sglang-0.5.23-*.whl -d sglang
        pip_ install --target sglang transformers==5.17.0 orjson pybase64 starlette msgspec pyzmq ipython \
            aiohttp psutil requests setproctitle anyio pydantic tqdm ;;
    vllm)  # vLLM pins a CUDA torch (336 MB wheel): unpacked, with the dependencies its fp8_utils imports
        pip_ download --no-deps -d wheels vllm==0.33.0
        rm -rf vllm && mkdir vllm && unzip -q wheels/vllm-0.33.0-*.whl -d vllm
        pip_ install --target vllm --no-deps pyzmq msgspec cachetools blake3 cbor2 pybase64 cloudpickle py-cpuinfo \
            openai
        pip_ install --target vllm psutil transformers==5.17.0 pydantic requests tqdm pyyaml regex sentencepiece \
            protobuf einops ;;
    transformers)  # DeepSeek's act_quant Triton kernel, as transformers 4.57 ships it
        rm -rf transformers && pip_ install --target transformers transformers==4.57.6 ;;
    deepseek)  # DeepSeek-V3's inference/kernel.py (fp8_gemm): not packaged; the file at a pinned commit
        rm -rf deepseek && mkdir -p deepseek/deepseek_v3_inference
        curl -fsSL -o deepseek/deepseek_v3_inference/kernel.py \
            https://raw.githubusercontent.com/deepseek-ai/DeepSeek-V3/9b4e9788e4a3a731f7567338ed15d3ec549ce03b/inference/kernel.py
        echo "ffee39fb93658b6ddd783c0932b1445cc4a007a061c0de2a40ac2a3b1563cc00  deepseek/deepseek_v3_inference/kernel.py" \
            | sha256sum -c --quiet - ;;
    *) echo "unknown project $p (aiter fbgemm sglang transformers vllm deepseek)" >&2; exit 2 ;;
    esac
    echo "$p: $(du -sh "$p" | cut -f1) in $DIR/$p"
done
