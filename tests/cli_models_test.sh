#!/usr/bin/env bash
# Model files whose metadata disagrees with their tensors, config.json errors, and a single .safetensors
# file as the model: each is one error line (exit 2) naming the file and the key or tensor, never a run.
set -u
source "$(dirname "$0")/cli_lib.sh"
FIX=tests/fixtures/models
PT=1,17,42,99

# variant NAME PYTHON: a copy of the llama fixture whose config.json, as `c`, the Python statements edit.
variant() {
  local d="$tmp/$1"
  mkdir -p "$d"
  cp "$FIX/llama/model.safetensors" "$FIX/llama/generation_config.json" "$d/"
  python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(c, open(sys.argv[2], "w"), indent=1)' "$FIX/llama/config.json" "$d/config.json" "$2"
  echo "$d"
}

# ---- config.json against the tensors ----
d=$(variant fewer 'c["num_hidden_layers"] = 1')
expect_error cfg_fewer_layers_generate "model.safetensors: tensor 'model\.layers\.1\.[a-z_.]+' is for layer 1, but 'num_hidden_layers' = 1 in .*/fewer/config.json" -- generate "$d" --prompt-tokens $PT -q
expect_error cfg_fewer_layers_compile "tensor 'model\.layers\.1\.[a-z_.]+' is for layer 1, but 'num_hidden_layers' = 1" -- compile "$d" --ir graph
d=$(variant more 'c["num_hidden_layers"] = 3')
expect_error cfg_more_layers "model.safetensors: no tensor 'model\.layers\.2\.input_layernorm\.weight' for layer 2, which 'num_hidden_layers' = 3" -- generate "$d" --prompt-tokens $PT -q
d=$(variant ffn 'c["intermediate_size"] = 100')
expect_error cfg_shape "tensor 'model\.layers\.0\.mlp\.gate_proj\.weight' has shape \[128, 64\], but the model's hyperparameters give \[100, 64\]" -- generate "$d" --prompt-tokens $PT -q
d=$(variant tied_missing 'c["tie_word_embeddings"] = False; c["num_key_value_heads"] = 4')
expect_error cfg_kv_heads "tensor 'model\.layers\.0\.self_attn\.k_proj\.weight' has shape \[32, 64\], but the model's hyperparameters give \[64, 64\]" -- compile "$d" --ir graph

# ---- values and types the graph does not implement ----
d=$(variant gelu 'c["hidden_act"] = "gelu"')
expect_error cfg_hidden_act "gelu/config.json: hidden_act 'gelu' is not supported \(supported: silu\)" -- generate "$d" --prompt-tokens $PT -q
d=$(variant yarn 'c["rope_parameters"] = {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0}')
expect_error cfg_rope_parameters_type "yarn/config.json: rope_parameters type 'yarn' is not supported" -- generate "$d" --prompt-tokens $PT -q
d=$(variant partial 'c["partial_rotary_factor"] = 0.5')
expect_error cfg_partial_rotary "partial_rotary_factor 0.5 is not supported" -- generate "$d" --prompt-tokens $PT -q
d=$(variant theta 'c["rope_theta"] = -1.0; c["rope_parameters"]["rope_theta"] = -1.0')
expect_error cfg_rope_theta "theta/config.json: key 'rope_theta' = -1 is out of range" -- generate "$d" --prompt-tokens $PT -q
d=$(variant eps 'c["rms_norm_eps"] = 0')
expect_error cfg_rms_eps "key 'rms_norm_eps' = 0 is out of range" -- generate "$d" --prompt-tokens $PT -q
d=$(variant bigctx 'c["max_position_embeddings"] = 2**40')
expect_error cfg_ctx_too_large "key 'max_position_embeddings' = 1099511627776 is too large \(at most [0-9]+\)" -- generate "$d" --prompt-tokens $PT -q
d=$(variant window 'c["sliding_window"] = 8; c["architectures"] = ["MistralForCausalLM"]')
expect_error cfg_sliding_window "context of 16 exceeds the model's sliding window of 8" -- generate "$d" --prompt-tokens $PT -q --ctx 16

# ---- parse errors name the file (with line and column), not its directory ----
d=$(variant inf 'c["rope_theta"] = float("inf")')
expect_error cfg_json_names_file "^lathe: error: [^ ]*/inf/config.json:[0-9]+:[0-9]+: invalid JSON" -- generate "$d" --prompt-tokens $PT -q
printf '{"bos_token_id": 1,,}' >"$d/generation_config.json"
cp "$FIX/llama/config.json" "$d/config.json"
expect_error gen_json_names_file "^lathe: error: [^ ]*/inf/generation_config.json:1" -- generate "$d" --prompt-tokens $PT -q

# ---- a single .safetensors file: its directory is the model ----
run_lathe st_file_compile compile "$FIX/llama/model.safetensors" --ir graph && cp "$tmp/out" "$tmp/graph_file" &&
  run_lathe st_dir_compile compile "$FIX/llama" --ir graph &&
  if cmp -s "$tmp/out" "$tmp/graph_file" && [ -s "$tmp/out" ]; then pass st_file_compile; else fail st_file_compile "differs from the directory's graph"; fi
tokens() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["tokens"])' "$1"; }
run_lathe st_file_generate generate "$FIX/llama/model.safetensors" --prompt-tokens $PT --greedy --max-tokens 4 --ignore-eos --json -q &&
  cp "$tmp/out" "$tmp/gen_file" && run_lathe st_dir_generate generate "$FIX/llama" --prompt-tokens $PT --greedy --max-tokens 4 --ignore-eos --json -q &&
  if [ "$(tokens "$tmp/out")" = "$(tokens "$tmp/gen_file")" ]; then pass st_file_generate; else fail st_file_generate "tokens differ from the directory's run"; fi
mkdir -p "$tmp/lone" && cp "$FIX/llama/model.safetensors" "$tmp/lone/weights.safetensors"
expect_error st_file_without_config "lone/config.json: cannot open" -- compile "$tmp/lone/weights.safetensors" --ir graph

# ---- GGUF metadata against the tensors (a patched copy of the default model) ----
if [ ! -f "$DM" ]; then
  for t in gguf_block_count_smaller gguf_block_count_larger gguf_freq_base_inf gguf_rope_dims gguf_name_escaped; do
    skip $t "no default model at $DM"
  done
else
  G="$tmp/patched.gguf"
  # patch KEY FORMAT VALUE: a copy of the default model with that metadata value overwritten in place
  patch() {
    python3 -c 'import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
key, fmt = sys.argv[3].encode(), sys.argv[4]
if fmt == "rename":
    at = data.index(key); new = sys.argv[5].encode("latin-1").decode("unicode_escape").encode("latin-1")
    assert len(new) == len(key); data[at:at + len(key)] = new
else:
    at = data.index(struct.pack("<Q", len(key)) + key) + 8 + len(key) + 4
    val = float(sys.argv[5]) if fmt == "f" else int(sys.argv[5])
    data[at:at + 4] = struct.pack("<" + fmt, val)
open(sys.argv[2], "wb").write(data)' "$DM" "$G" "$@"
  }
  patch llama.block_count I 29
  expect_error gguf_block_count_smaller "patched.gguf: tensor 'blk\.29\.[a-z_.]+' is for layer 29, but 'llama.block_count' = 29" -- compile "$G" --ir graph
  patch llama.block_count I 31
  expect_error gguf_block_count_larger "patched.gguf: no tensor 'blk\.30\.attn_norm\.weight' for layer 30, which 'llama.block_count' = 31 implies" -- generate "$G" --prompt "Hi" -q
  patch llama.rope.freq_base f inf
  expect_error gguf_freq_base_inf "patched.gguf: key 'llama.rope.freq_base' = inf is out of range" -- generate "$G" --prompt "Hi" -q
  patch llama.rope.dimension_count I 32
  expect_error gguf_rope_dims "patched.gguf: metadata key 'llama.rope.dimension_count' = 32, but the heads are 64 wide" -- generate "$G" --prompt "Hi" -q
  patch blk.0.ffn_up.weight rename 'blk.0.ffn_\xff\x01.weight'
  expect_error gguf_name_escaped "tensor 'blk\.0\.ffn_\\\\xff\\\\x01\.weight' is not read by a llama model" -- compile "$G" --ir graph
  rm -f "$G"
fi
