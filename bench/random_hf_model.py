#!/usr/bin/env python3
"""Writes a Hugging Face Llama directory of random bf16 weights (config.json, model.safetensors) in the shape of
one of lathe's built-in configs, so that `lathe quantize DIR OUT.gguf --type q4_k_m` makes a GGUF file of that
shape where no real model can be fetched (the device machine): the GGUF path itself (its load, its upload as
stored, --weights auto) can then be benchmarked beside `--weights f32`. numpy only; no tokenizer.

    bench/random_hf_model.py OUT_DIR [--config llama-3.2-1b|smollm2-135m] [--seed N] [--layers N]
"""
import argparse
import json
import os
import struct

import numpy as np

CONFIGS = {
    "llama-3.2-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                         num_key_value_heads=8, head_dim=64, vocab_size=128256, rms_norm_eps=1e-5,
                         rope_theta=500000.0, max_position_embeddings=131072, tie_word_embeddings=True),
    "smollm2-135m": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                         num_key_value_heads=3, head_dim=64, vocab_size=49152, rms_norm_eps=1e-5,
                         rope_theta=100000.0, max_position_embeddings=8192, tie_word_embeddings=True),
}


def bf16_bytes(x):
    """float32 array -> bf16 bytes, rounded to nearest even"""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16).tobytes()


def tensors(c, rng):
    """(name, shape, scale) of every weight; matrices ~ N(0, 1/sqrt(fan_in)), norms ~ 1"""
    h, i, hd = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    yield "model.embed_tokens.weight", (c["vocab_size"], h), 1.0
    for layer in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % layer
        yield p + "input_layernorm.weight", (h,), None
        yield p + "post_attention_layernorm.weight", (h,), None
        for name, rows, cols in (("self_attn.q_proj", q, h), ("self_attn.k_proj", kv, h), ("self_attn.v_proj", kv, h),
                                 ("self_attn.o_proj", h, q), ("mlp.gate_proj", i, h), ("mlp.up_proj", i, h),
                                 ("mlp.down_proj", h, i)):
            yield p + name + ".weight", (rows, cols), cols ** -0.5
    yield "model.norm.weight", (h,), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--config", default="llama-3.2-1b", choices=sorted(CONFIGS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--layers", type=int, help="fewer layers than the config's")
    a = ap.parse_args()
    c = dict(CONFIGS[a.config])
    if a.layers:
        c["num_hidden_layers"] = a.layers
    rng = np.random.default_rng(a.seed)
    os.makedirs(a.out, exist_ok=True)
    cfg = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_act="silu", torch_dtype="bfloat16",
               bos_token_id=1, eos_token_id=2, **c)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    specs = list(tensors(c, rng))
    header, off = {}, 0
    for name, shape, _ in specs:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    hj = json.dumps(header).encode()
    hj += b" " * (-len(hj) % 8)
    with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj)
        for name, shape, scale in specs:
            if scale is None:
                x = 1.0 + 0.1 * rng.standard_normal(shape, dtype=np.float32)
            else:
                x = rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)
            f.write(bf16_bytes(x))
    print("%s: %s, %d tensors, %.2f GB" % (a.out, a.config, len(specs), off / 1e9))


if __name__ == "__main__":
    main()
