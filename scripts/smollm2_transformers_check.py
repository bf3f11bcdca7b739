#!/usr/bin/env python3
"""Default-model reference from Hugging Face transformers itself: loads the SmolLM2-135M-Instruct Q4_1
GGUF with transformers (which dequantizes it), runs the fixture prompt in float64 and float32, and
writes the last-position logits and the greedy continuation. Run where torch, transformers and gguf
are installed (the device image plus a carried gguf wheel):
    python3 scripts/smollm2_transformers_check.py DIR GGUF_NAME OUT_DIR
"""
import json, sys
import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM

d, name, out = sys.argv[1:4]
ids = [504, 3575, 282, 4649, 314]  # "The capital of France is"
model = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, torch_dtype=torch.float32).eval()
x = torch.tensor([ids])
with torch.no_grad():
    l32 = model(x).logits[0, -1].double().numpy()
    model = model.double()
    l64 = model(x).logits[0, -1].numpy()
    seq = list(ids)
    for _ in range(16):  # greedy, float64
        seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))
np.asarray(l64, dtype="<f4").tofile(f"{out}/logits_last_transformers.f32")
json.dump({"prompt_ids": ids, "greedy": seq[len(ids):], "top5": [int(i) for i in np.argsort(-l64)[:5]],
           "maxdiff_f32_vs_f64": float(np.max(np.abs(l32 - l64))), "transformers_version": transformers.__version__,
           "torch_version": torch.__version__}, open(f"{out}/transformers.json", "w"), indent=1)
print(open(f"{out}/transformers.json").read())
