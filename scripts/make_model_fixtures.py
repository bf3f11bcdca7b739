"""Build lathe's tiny random-weight model fixtures with Hugging Face transformers.

Needs torch + transformers (run on the device machine; no network used):
    python3 scripts/make_model_fixtures.py --out $OUT
writes $OUT/models.tar.gz (one folder per model: config.json, model.safetensors,
generation_config.json, expected.json) and $OUT/summary.json.  Unpack it into
tests/fixtures/models/.

Reference logits are float64.  Stock transformers is not fully float64 even
after model.double(): RMSNorm, RoPE cos/sin and eager softmax are forced to
float32.  So the float64 model here has its RMSNorm and rotary modules
replaced (per instance) by float64-faithful versions and uses SDPA attention;
everything else (projections, biases, q/k norms, GQA, MLP, lm_head) is
transformers' own code.  The stock float64 and float32 results are compared
against it and their max differences recorded in expected.json.

It also validates scripts/numpy_llama.py (the reference used for the SmolLM2
GGUF, where transformers is not available) against the float64 model on every
saved directory, and reloads each saved directory with from_pretrained.
"""
import argparse
import copy
import json
import os
import shutil
import sys
import tarfile
import tempfile
import traceback
import types

import numpy as np
import torch
import transformers
from transformers import (AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM,
                          MistralConfig, MistralForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy_llama  # noqa: E402

PROMPT_IDS = [1, 17, 42, 99, 3, 250, 7, 64, 128, 5, 200, 33]
N_GREEDY = 8
WEIGHT_STD = 0.1
NUMPY_TOL = 1e-6

SIZES = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, intermediate_size=128, vocab_size=256,
             max_position_embeddings=256, rms_norm_eps=1e-5,
             attn_implementation="sdpa")
ROPE_DEFAULT = {"rope_type": "default", "rope_theta": 10000.0}
ROPE_LLAMA3 = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
               "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 32}

# name -> (config class, model class, extra config kwargs, seed)
SPECS = {
    "llama": (LlamaConfig, LlamaForCausalLM,
              dict(rope_parameters=ROPE_DEFAULT, tie_word_embeddings=False), 1),
    "llama31": (LlamaConfig, LlamaForCausalLM,
                dict(rope_parameters=ROPE_LLAMA3, tie_word_embeddings=True), 2),
    "qwen2": (Qwen2Config, Qwen2ForCausalLM,
              dict(rope_parameters=ROPE_DEFAULT, tie_word_embeddings=True), 3),
    "qwen3": (Qwen3Config, Qwen3ForCausalLM,
              dict(rope_parameters=ROPE_DEFAULT, tie_word_embeddings=True, head_dim=16), 4),
    "mistral": (MistralConfig, MistralForCausalLM,
                dict(rope_parameters=ROPE_DEFAULT, tie_word_embeddings=False,
                     sliding_window=None), 5),
}


def log(*a):
    print(*a, flush=True)


def randomize(model, seed):
    """Non-degenerate weights: norms 1 + 0.1*randn (so they matter), biases
    0.1*randn, everything else normal(0, WEIGHT_STD).  Fixed parameter order."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(WEIGHT_STD * torch.randn_like(p))


# ------------------------------------------------ float64-faithful patches


def _rms_norm64(self, x):
    var = x.pow(2).mean(-1, keepdim=True)
    return self.weight * (x * torch.rsqrt(var + self.variance_epsilon))


def _rotary64(self, x, position_ids):
    pos = position_ids.to(torch.float64)
    freqs = pos[:, :, None] * self._inv_freq64[None, None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return ((emb.cos() * self.attention_scaling).to(x.dtype),
            (emb.sin() * self.attention_scaling).to(x.dtype))


def make_float64(model):
    """Copy of `model` in float64 with RMSNorm/RoPE computed in float64."""
    m = copy.deepcopy(model).double().eval()
    cfg = m.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    n_norm = n_rot = 0
    for mod in m.modules():
        cls = type(mod).__name__
        if cls.endswith("RMSNorm"):
            mod.forward = types.MethodType(_rms_norm64, mod)
            n_norm += 1
        elif cls.endswith("RotaryEmbedding"):
            inv = numpy_llama.inv_freq(cfg.rope_parameters, head_dim)
            stock = mod.inv_freq.detach().cpu().numpy()
            rel = float(np.max(np.abs(inv - stock) / np.abs(inv)))
            assert rel < 1e-5, f"float64 inv_freq disagrees with transformers' ({rel})"
            mod._inv_freq64 = torch.tensor(inv, dtype=torch.float64)
            mod.forward = types.MethodType(_rotary64, mod)
            n_rot += 1
    assert n_norm > 0 and n_rot == 1, (n_norm, n_rot)
    return m


# ------------------------------------------------ running


@torch.no_grad()
def logits_of(model, ids):
    x = torch.tensor([ids], dtype=torch.long)
    return model(input_ids=x).logits[0].to(torch.float64)


@torch.no_grad()
def greedy_manual(model, ids, n):
    """Greedy by re-running the whole prefix (no cache); also the smallest
    top1-top2 logit margin seen, to show how robust the sequence is."""
    ids = list(ids)
    out, margin = [], float("inf")
    for _ in range(n):
        last = logits_of(model, ids)[-1]
        top2 = torch.topk(last, 2).values
        margin = min(margin, float(top2[0] - top2[1]))
        nxt = int(torch.argmax(last))
        out.append(nxt)
        ids.append(nxt)
    return out, margin


@torch.no_grad()
def greedy_generate(model, ids, n):
    gc = copy.deepcopy(model.generation_config)
    gc.do_sample = False
    gc.max_new_tokens = n
    gc.min_new_tokens = None
    gc.eos_token_id = None
    gc.pad_token_id = 0
    x = torch.tensor([ids], dtype=torch.long)
    return model.generate(x, generation_config=gc)[0, len(ids):].tolist()


def maxdiff(a, b):
    return float(torch.max(torch.abs(torch.as_tensor(a, dtype=torch.float64) -
                                     torch.as_tensor(b, dtype=torch.float64))))


def add_legacy_rope_keys(path):
    """transformers v5 writes `rope_parameters`; most hub checkpoints (and so
    most loaders) use top-level `rope_theta` + `rope_scaling`.  Write both."""
    p = os.path.join(path, "config.json")
    with open(p) as f:
        c = json.load(f)
    rp = c.get("rope_parameters") or {}
    c["rope_theta"] = rp.get("rope_theta", 10000.0)
    if rp.get("rope_type", "default") != "default":
        c["rope_scaling"] = dict(rp)
    with open(p, "w") as f:
        json.dump(c, f, indent=2, sort_keys=True)
        f.write("\n")


def reference(name, model, save_dir, weights_note):
    """Compute all reference data for a float32 `model` already saved in save_dir."""
    m64 = make_float64(model)
    stock64 = copy.deepcopy(model).double().eval()
    m32 = model.eval()

    l64 = logits_of(m64, PROMPT_IDS)
    l_stock64 = logits_of(stock64, PROMPT_IDS)
    l32 = logits_of(m32, PROMPT_IDS)
    greedy, margin = greedy_manual(m64, PROMPT_IDS, N_GREEDY)
    try:
        gen = greedy_generate(m64, PROMPT_IDS, N_GREEDY)
        gen_ok = gen == greedy
    except Exception as e:  # recorded, not fatal: the manual loop is the truth
        gen, gen_ok = f"error: {type(e).__name__}: {e}", False

    # the saved directory as another program would read it
    reload_err, reload_diff = None, None
    try:
        rl = AutoModelForCausalLM.from_pretrained(save_dir, dtype=torch.float32,
                                                  attn_implementation="sdpa")
        reload_diff = maxdiff(logits_of(rl.eval(), PROMPT_IDS), l32)
    except Exception as e:
        reload_err = f"{type(e).__name__}: {e}"

    np_err, np_diff, np_greedy = None, None, None
    try:
        cfg, W = numpy_llama.load_hf_dir(save_dir)
        np_diff = maxdiff(numpy_llama.forward(cfg, W, PROMPT_IDS), l64)
        np_greedy = numpy_llama.greedy(cfg, W, PROMPT_IDS, N_GREEDY)
    except Exception as e:
        np_err = f"{type(e).__name__}: {e}"

    doc = {
        "model": name,
        "weights": weights_note,
        "prompt_ids": PROMPT_IDS,
        "logits_last": l64[-1].tolist(),
        "logits_all": l64.tolist(),
        "greedy": greedy,
        "greedy_min_top2_margin": margin,
        "dtype_compute": "float64",
        "reference": "transformers model in float64 with RMSNorm and RoPE computed in "
                     "float64 (stock forces float32 there) and SDPA attention; greedy "
                     "re-runs the full prefix each step",
        "logits_last_f32": l32[-1].tolist(),
        "maxdiff_stock_float64_vs_reference": maxdiff(l_stock64, l64),
        "maxdiff_float32_vs_reference": maxdiff(l32, l64),
        "maxdiff_numpy_llama_vs_reference": np_diff,
        "generate_matches_greedy": gen_ok,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
    }
    check = {
        "numpy_maxdiff": np_diff, "numpy_error": np_err, "numpy_greedy_ok": np_greedy == greedy,
        "stock64_maxdiff": doc["maxdiff_stock_float64_vs_reference"],
        "f32_maxdiff": doc["maxdiff_float32_vs_reference"],
        "generate": gen if not gen_ok else "ok", "reload_maxdiff_vs_f32": reload_diff,
        "reload_error": reload_err, "greedy": greedy, "min_margin": margin,
        "logit_std": float(l64.std()),
    }
    with open(os.path.join(save_dir, "expected.json"), "w") as f:
        json.dump(doc, f)
        f.write("\n")
    return check


def build(name):
    cfg_cls, model_cls, extra, seed = SPECS[name]
    config = cfg_cls(**SIZES, **extra)
    model = model_cls(config).to(torch.float32)
    if config.tie_word_embeddings:
        model.tie_weights()
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    randomize(model, seed)
    return model.eval()


def save(model, path):
    model.save_pretrained(path)
    add_legacy_rope_keys(path)


def process(name, work, summary, failures):
    """Build, save and compute references for one model (and llama_bf16 after llama)."""
    model = build(name)
    log(f"== {name}: attn={model.config._attn_implementation} "
        f"params={sum(p.numel() for p in model.parameters())}")
    d = os.path.join(work, name)
    save(model, d)
    res = reference(name, model, d, f"random, seed {SPECS[name][3]}, float32")
    summary["models"][name] = res
    log(json.dumps(res))
    if res["numpy_maxdiff"] is None or res["numpy_maxdiff"] >= NUMPY_TOL:
        failures.append(f"{name}: numpy_llama maxdiff {res['numpy_maxdiff']}")
    if name == "llama":
        bf = copy.deepcopy(model).to(torch.bfloat16)
        dbf = os.path.join(work, "llama_bf16")
        save(bf, dbf)
        # Round the parameters only: module.to(bfloat16) would also round the
        # RoPE inv_freq buffer, which is not part of the checkpoint.
        rounded = copy.deepcopy(model)
        with torch.no_grad():
            for p in rounded.parameters():
                p.copy_(p.to(torch.bfloat16).to(torch.float32))
        res = reference("llama_bf16", rounded, dbf,
                        "llama fixture weights rounded to bfloat16 (stored bf16); "
                        "logits computed on those rounded values")
        summary["models"]["llama_bf16"] = res
        log("== llama_bf16")
        log(json.dumps(res))
        if res["numpy_maxdiff"] is None or res["numpy_maxdiff"] >= NUMPY_TOL:
            failures.append(f"llama_bf16: numpy_llama maxdiff {res['numpy_maxdiff']}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(4)
    log("torch", torch.__version__, "transformers", transformers.__version__,
        "numpy", np.__version__)

    work = tempfile.mkdtemp(prefix="lathe_models_")
    summary = {"torch": torch.__version__, "transformers": transformers.__version__,
               "numpy": np.__version__, "models": {}}
    failures = []
    for name in SPECS:
        try:
            process(name, work, summary, failures)
        except Exception:  # keep going: one broken model must not lose the others
            tb = traceback.format_exc()
            log(tb)
            failures.append(f"{name}: {tb.strip().splitlines()[-1]}")

    sizes = {}
    for root, _, files in os.walk(work):
        for fn in files:
            sizes[os.path.relpath(os.path.join(root, fn), work)] = os.path.getsize(os.path.join(root, fn))
    summary["file_sizes"] = sizes
    summary["failures"] = failures
    os.makedirs(args.out, exist_ok=True)
    with tarfile.open(os.path.join(args.out, "models.tar.gz"), "w:gz") as t:
        for name in sorted(os.listdir(work)):
            t.add(os.path.join(work, name), arcname=name)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    shutil.rmtree(work)
    log("sizes", json.dumps(sizes))
    log("FAILURES" if failures else "ALL OK", failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
