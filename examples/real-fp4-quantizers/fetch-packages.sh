#!/usr/bin/env bash
# Install compressed-tensors and NVIDIA ModelOpt, with the pure-Python packages their imports need, into DIR
# (`pip install --target DIR --no-deps`: nothing lands in your environment, its torch and numpy stay yours).
# Then `PYTHONPATH=DIR python -m pytest -m ocp` checks their quantizers here (torchao is installed the usual way).
#
#   bash fetch-packages.sh DIR
#
# Versions are the ones the recipes in pyproject.toml were read from and checked with (2026-12-05).
set -euo pipefail
DIR=${1:?usage: fetch-packages.sh DIR}
pip_() { python -m pip install --quiet --disable-pip-version-check --no-deps --target "$DIR" "$@"; }
pip_ compressed-tensors==0.19.0 nvidia-modelopt==0.47.0
# compressed-tensors imports transformers (and so huggingface_hub), pydantic, loguru
pip_ transformers==5.17.0 "huggingface-hub>=1.5,<2" tokenizers==0.23.3 pydantic==2.14.4 pydantic-core==2.50.5 \
    annotated-types typing-inspection typing-extensions loguru psutil tqdm filelock fsspec hf-xet httpx httpcore \
    httpx2 httpcore2 truststore h11 anyio sniffio certifi idna typer-slim shellingham click pyyaml regex
# modelopt.torch.quantization imports these (no GPU needed)
pip_ omegaconf pulp rich markdown-it-py mdurl pygments nvidia-ml-py ninja scipy requests urllib3
echo "compressed-tensors and nvidia-modelopt in $DIR ($(du -sh "$DIR" | cut -f1)); PYTHONPATH=$DIR"
