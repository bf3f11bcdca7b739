#!/usr/bin/env python3
"""Writes a tiny chat-capable model for the chat tests: the random-weight `llama` fixture with its
vocabulary widened to a byte-level BPE tokenizer's, and that tokenizer.json beside it. It loads in a
blink and has a ChatML vocabulary (<|im_start|>, <|im_end|> = eos), so `lathe chat` runs on it.

Its replies are noise, but printable ASCII on one line that never ends by itself: the lm_head rows of
tokens that decode to anything else (control bytes, newlines, non-ASCII, the special tokens, eos
included) are zero, so their logit is 0, and the printable tokens' rows come in +r/-r pairs, so one of
each pair has a logit above 0. A terminal test can print thousands of its tokens safely.
Standard library only.

usage: make_chat_fixture.py FIXTURE_DIR TOKENIZER_JSON OUT_DIR
"""
import json
import os
import shutil
import struct
import sys


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", None)
    tensors = {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in header.items()}
    return meta, tensors


def write_safetensors(path, meta, tensors):
    header, blobs, off = {}, [], 0
    if meta is not None:
        header["__metadata__"] = meta
    for name, (dtype, shape, blob) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def byte_decoder():
    """GPT-2's byte-level alphabet, reversed: the character each byte is written as -> the byte."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = {b: b for b in keep}, 0
    for b in range(256):
        if b not in chars:
            chars[b] = 256 + extra
            extra += 1
    return {chr(c): b for b, c in chars.items()}


def printable_ids(tok):
    dec = byte_decoder()
    special = {t["id"] for t in tok.get("added_tokens", [])}
    ids = []
    for text, i in tok["model"]["vocab"].items():
        raw = bytes(dec.get(ch, 0) for ch in text)
        if i not in special and raw and all(32 <= b < 127 for b in raw):
            ids.append(i)
    return sorted(ids)


def main():
    src, tok, out = sys.argv[1:4]
    tok_json = json.load(open(tok))
    vocab = len(tok_json["model"]["vocab"])
    meta, tensors = read_safetensors(os.path.join(src, "model.safetensors"))
    # the embedding: the fixture's rows, repeated
    dtype, (rows, cols), blob = tensors["model.embed_tokens.weight"]
    assert dtype == "F32"
    row = len(blob) // rows
    tensors["model.embed_tokens.weight"] = (dtype, [vocab, cols], b"".join(blob[(i % rows) * row:(i % rows + 1) * row] for i in range(vocab)))
    # lm_head: zero rows but for the printable tokens, which get the fixture's rows as +r, -r pairs
    dtype, (rows, cols), blob = tensors["lm_head.weight"]
    good = printable_ids(tok_json)
    head = [struct.pack("<%df" % cols, *([0.0] * cols))] * vocab
    for k, i in enumerate(good):
        r = struct.unpack_from("<%df" % cols, blob, (k // 2 % rows) * row)
        head[i] = struct.pack("<%df" % cols, *(x if k % 2 == 0 else -x for x in r))
    tensors["lm_head.weight"] = (dtype, [vocab, cols], b"".join(head))
    os.makedirs(out, exist_ok=True)
    write_safetensors(os.path.join(out, "model.safetensors"), meta, tensors)
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg["vocab_size"] = vocab
    cfg["max_position_embeddings"] = 4096
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
    shutil.copy(tok, os.path.join(out, "tokenizer.json"))


if __name__ == "__main__":
    main()
