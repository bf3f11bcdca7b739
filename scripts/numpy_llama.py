"""Plain numpy float64 reference forward pass for Llama-family decoder models.

Covers what lathe's model fixtures need: Llama (incl. llama3 RoPE scaling),
Mistral (no sliding window), Qwen2 (q/k/v biases) and Qwen3 (per-head q/k
RMSNorm).  Weights come either from a Hugging Face directory (config.json +
model.safetensors, read by a tiny parser here so that bf16 works without
torch) or from a llama-architecture GGUF file (dequantized by the `gguf`
package, with llama.cpp's q/k row permutation undone).

Everything is computed in float64 end to end (unlike transformers, which
forces RMSNorm, RoPE and eager softmax to float32), so this is the "true"
float64 answer for a given set of weights.

Usage as a script:
    python3 scripts/numpy_llama.py HF_DIR_OR_GGUF 1 17 42 ...   # prints top-5 of last logits
"""
import json
import math
import os
import struct
import sys

import numpy as np

# ---------------------------------------------------------------- loading


_ST_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16,
              "I64": np.int64, "I32": np.int32}


def read_safetensors(path):
    """Return {name: float64 ndarray}. Handles BF16 by widening the bits."""
    with open(path, "rb") as f:
        (hlen,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(hlen))
        blob = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        raw = blob[lo:hi]
        if info["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32)
        else:
            arr = np.frombuffer(raw, dtype=np.dtype(_ST_DTYPES[info["dtype"]]).newbyteorder("<"))
        out[name] = arr.reshape(info["shape"]).astype(np.float64)
    return out


def _rope_from_hf_config(c):
    """RoPE parameters from either the transformers-v5 `rope_parameters` form
    or the legacy `rope_theta` + `rope_scaling` form."""
    rp = dict(c.get("rope_parameters") or {})
    legacy = c.get("rope_scaling") or {}
    for k, v in legacy.items():
        rp.setdefault(k, v)
    rp.setdefault("rope_theta", c.get("rope_theta", 10000.0))
    rp.setdefault("rope_type", rp.get("type", "default"))
    return rp


def load_hf_dir(path):
    """Return (cfg, weights) for a Hugging Face model directory."""
    with open(os.path.join(path, "config.json")) as f:
        c = json.load(f)
    W = read_safetensors(os.path.join(path, "model.safetensors"))
    n_heads = c["num_attention_heads"]
    cfg = {
        "hidden": c["hidden_size"],
        "n_layers": c["num_hidden_layers"],
        "n_heads": n_heads,
        "n_kv_heads": c.get("num_key_value_heads") or n_heads,
        "head_dim": c.get("head_dim") or c["hidden_size"] // n_heads,
        "eps": c["rms_norm_eps"],
        "rope": _rope_from_hf_config(c),
    }
    if "lm_head.weight" not in W:  # tied embeddings: saved once
        W["lm_head.weight"] = W["model.embed_tokens.weight"]
    return cfg, W


def unpermute_qk(w, n_head):
    """Undo llama.cpp's convert-time row permutation of q_proj/k_proj, which
    turns HF's rotate-half RoPE layout into interleaved pairs."""
    out, inp = w.shape
    head_dim = out // n_head
    return w.reshape(n_head, head_dim // 2, 2, inp).swapaxes(1, 2).reshape(out, inp)


_GGUF_NAMES = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}


def load_gguf(path):
    """Return (cfg, weights, reader) for a llama-architecture GGUF file."""
    import gguf  # only needed here; the device image lacks it
    from gguf import quants

    r = gguf.GGUFReader(path)
    meta = {k: f.contents() for k, f in r.fields.items()
            if not k.startswith("tokenizer.ggml.")}
    arch = meta["general.architecture"]
    if arch != "llama":
        raise ValueError(f"{path}: architecture {arch!r}, only 'llama' is handled")
    n_heads = meta["llama.attention.head_count"]
    n_kv = meta.get("llama.attention.head_count_kv", n_heads)
    hidden = meta["llama.embedding_length"]
    cfg = {
        "hidden": hidden,
        "n_layers": meta["llama.block_count"],
        "n_heads": n_heads,
        "n_kv_heads": n_kv,
        "head_dim": meta.get("llama.rope.dimension_count", hidden // n_heads),
        # stored as float32 in the file; use exactly that value
        "eps": float(meta["llama.attention.layer_norm_rms_epsilon"]),
        "rope": {"rope_type": "default",
                 "rope_theta": float(meta.get("llama.rope.freq_base", 10000.0))},
    }
    W = {}
    for t in r.tensors:
        arr = quants.dequantize(t.data, t.tensor_type).astype(np.float64)
        arr = arr.reshape([int(d) for d in reversed(t.shape)])  # ggml ne is reversed
        name = t.name
        if name == "token_embd.weight":
            W["model.embed_tokens.weight"] = arr
        elif name == "output_norm.weight":
            W["model.norm.weight"] = arr
        elif name == "output.weight":
            W["lm_head.weight"] = arr
        elif name.startswith("blk."):
            _, idx, kind, _ = name.split(".")
            if kind == "attn_q":
                arr = unpermute_qk(arr, n_heads)
            elif kind == "attn_k":
                arr = unpermute_qk(arr, n_kv)
            W[f"model.layers.{idx}.{_GGUF_NAMES[kind]}.weight"] = arr
        else:
            raise ValueError(f"{path}: unexpected tensor {name}")
    if "lm_head.weight" not in W:
        W["lm_head.weight"] = W["model.embed_tokens.weight"]
    return cfg, W, r


# ---------------------------------------------------------------- forward


def inv_freq(rope, head_dim):
    """RoPE inverse frequencies in float64 (default and llama3 scaling)."""
    base = float(rope["rope_theta"])
    inv = 1.0 / (base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    kind = rope.get("rope_type", "default")
    if kind == "default":
        return inv
    if kind != "llama3":
        raise ValueError(f"rope_type {kind!r} not handled")
    factor = float(rope["factor"])
    lo, hi = float(rope["low_freq_factor"]), float(rope["high_freq_factor"])
    old_ctx = float(rope["original_max_position_embeddings"])
    wavelen = 2 * math.pi / inv
    scaled = np.where(wavelen > old_ctx / lo, inv / factor, inv)
    smooth = (old_ctx / wavelen - lo) / (hi - lo)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old_ctx / hi) & ~(wavelen > old_ctx / lo)
    return np.where(medium, smoothed, scaled)


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope_rotate_half(x, cos, sin):
    """x: [heads, T, head_dim]; HF layout: pairs are (i, i + head_dim/2)."""
    half = x.shape[-1] // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rot * sin


def forward(cfg, W, ids):
    """Return logits [T, vocab] (float64) for token ids `ids`."""
    T = len(ids)
    H, KV, D = cfg["n_heads"], cfg["n_kv_heads"], cfg["head_dim"]
    eps = cfg["eps"]
    freqs = np.outer(np.arange(T, dtype=np.float64), inv_freq(cfg["rope"], D))
    emb = np.concatenate([freqs, freqs], axis=-1)  # [T, D]
    cos, sin = np.cos(emb), np.sin(emb)
    causal = np.triu(np.full((T, T), -np.inf), k=1)

    x = W["model.embed_tokens.weight"][np.asarray(ids)]
    for i in range(cfg["n_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)

        def proj(name):
            y = h @ W[p + f"self_attn.{name}.weight"].T
            b = W.get(p + f"self_attn.{name}.bias")
            return y if b is None else y + b

        q = proj("q_proj").reshape(T, H, D).transpose(1, 0, 2)
        k = proj("k_proj").reshape(T, KV, D).transpose(1, 0, 2)
        v = proj("v_proj").reshape(T, KV, D).transpose(1, 0, 2)
        if p + "self_attn.q_norm.weight" in W:  # Qwen3: per-head norm before RoPE
            q = rms_norm(q, W[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, W[p + "self_attn.k_norm.weight"], eps)
        q = rope_rotate_half(q, cos, sin)
        k = rope_rotate_half(k, cos, sin)
        group = H // KV  # GQA: query head j reads kv head j // group
        k = np.repeat(k, group, axis=0)
        v = np.repeat(v, group, axis=0)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(D) + causal
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        a = (s / s.sum(axis=-1, keepdims=True)) @ v  # [H, T, D]
        a = a.transpose(1, 0, 2).reshape(T, H * D)
        o = a @ W[p + "self_attn.o_proj.weight"].T
        ob = W.get(p + "self_attn.o_proj.bias")
        x = x + (o if ob is None else o + ob)

        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        g = h @ W[p + "mlp.gate_proj.weight"].T
        u = h @ W[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ W[p + "mlp.down_proj.weight"].T

    x = rms_norm(x, W["model.norm.weight"], eps)
    return x @ W["lm_head.weight"].T


def greedy(cfg, W, ids, n_new):
    """Greedy continuation by re-running the full prefix each step (no cache)."""
    ids = list(ids)
    out = []
    for _ in range(n_new):
        nxt = int(np.argmax(forward(cfg, W, ids)[-1]))
        out.append(nxt)
        ids.append(nxt)
    return out


def load_any(path):
    if path.endswith(".gguf"):
        cfg, W, _ = load_gguf(path)
        return cfg, W
    return load_hf_dir(path)


if __name__ == "__main__":
    cfg, W = load_any(sys.argv[1])
    ids = [int(a) for a in sys.argv[2:]] or [1, 2, 3]
    last = forward(cfg, W, ids)[-1]
    top = np.argsort(-last)[:5]
    print(json.dumps({"top5_ids": top.tolist(), "top5_logits": last[top].tolist()}))
