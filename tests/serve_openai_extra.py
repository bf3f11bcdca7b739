"""`lathe serve`'s sampling extras and embeddings through the official `openai` client (tests/cli_serve_test.sh).

    serve_openai_extra.py PORT MODEL

Prints "ok NAME" or "FAIL NAME: why" per check."""
import base64
import json
import math
import struct
import sys
import urllib.request

import openai

port, model = int(sys.argv[1]), sys.argv[2]
c = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % port, api_key="unused", max_retries=0)


def check(name, cond, why):
    print(("ok " + name) if cond else "FAIL %s: %s" % (name, why), flush=True)


# penalties: greedy with the largest frequency penalty never repeats a token here; without, it does
prompt = "one two one two one two one two"
plain = c.completions.create(model=model, prompt=prompt, max_tokens=12, temperature=0, logprobs=0,
                             extra_body={"ignore_eos": True})
pen = c.completions.create(model=model, prompt=prompt, max_tokens=12, temperature=0, logprobs=0,
                           frequency_penalty=2.0, presence_penalty=2.0, extra_body={"ignore_eos": True})
toks, ptoks = plain.choices[0].logprobs.tokens, pen.choices[0].logprobs.tokens
check("openai_penalty_baseline_repeats", len(set(toks)) < len(toks), toks)
check("openai_penalty_no_repeats", len(ptoks) == 12 and len(set(ptoks)) == len(ptoks), ptoks)

# completions logprobs: the four lists, one entry per token; greedy: the chosen token is the most likely
r = c.completions.create(model=model, prompt="The capital of France is", max_tokens=6, temperature=0, logprobs=5)
lp = r.choices[0].logprobs
n = r.usage.completion_tokens
shape = (len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == n
         and all(len(t) in (5, 6) for t in lp.top_logprobs))
check("openai_logprobs_shape", shape, lp)
best = all(abs(lp.token_logprobs[k] - max(lp.top_logprobs[k].values())) < 1e-6 for k in range(n))
mass = all(sum(math.exp(v) for v in t.values()) <= 1 + 1e-5 for t in lp.top_logprobs)
check("openai_logprobs_greedy_max", best and mass and all(v <= 0 for v in lp.token_logprobs), lp)
offsets = [sum(len(t) for t in lp.tokens[:k]) for k in range(n)]
check("openai_logprobs_text", "".join(lp.tokens) == r.choices[0].text and lp.text_offset == offsets,
      (lp.tokens, r.choices[0].text, lp.text_offset))
# stop strings cut the logprobs with the text: no token that begins after the cut
rs = c.completions.create(model=model, prompt="The capital of France is", max_tokens=6, temperature=0, logprobs=1,
                          stop=["."])
check("openai_logprobs_stop", "".join(rs.choices[0].logprobs.tokens).startswith(rs.choices[0].text)
      and len(rs.choices[0].logprobs.tokens) < n, rs.choices[0])

# chat logprobs, whole and streamed: the same tokens and values
msgs = [{"role": "user", "content": "Name a colour."}]
w = c.chat.completions.create(model=model, messages=msgs, max_tokens=5, temperature=0, logprobs=True, top_logprobs=3)
content = w.choices[0].logprobs.content
check("openai_chat_logprobs", len(content) == w.usage.completion_tokens and all(
    len(e.top_logprobs) == 3 and e.top_logprobs[0].token == e.token and bytes(e.bytes) == e.token.encode()
    for e in content), content)
streamed = []
for chunk in c.chat.completions.create(model=model, messages=msgs, max_tokens=5, temperature=0, logprobs=True,
                                       top_logprobs=3, stream=True):
    if chunk.choices and chunk.choices[0].logprobs:
        streamed += chunk.choices[0].logprobs.content
check("openai_chat_logprobs_stream", [(e.token, round(e.logprob, 5)) for e in streamed]
      == [(e.token, round(e.logprob, 5)) for e in content], (streamed, content))

# embeddings: one L2-normalized vector per input, in order, the same for the same input; base64 is the floats
e = c.embeddings.create(model=model, input=["The cat sat.", "Quantum chromodynamics", "The cat sat."])
vecs = [d.embedding for d in e.data]
norms = [math.sqrt(sum(x * x for x in v)) for v in vecs]
check("openai_embeddings_shape", [d.index for d in e.data] == [0, 1, 2] and len(set(map(len, vecs))) == 1
      and len(vecs[0]) > 100 and all(abs(x - 1) < 1e-4 for x in norms), (len(vecs), norms))
check("openai_embeddings_same_input", max(abs(a - b) for a, b in zip(vecs[0], vecs[2])) < 1e-6
      and max(abs(a - b) for a, b in zip(vecs[0], vecs[1])) > 1e-3, "first and third differ, or first and second same")
single = c.embeddings.create(model=model, input="Quantum chromodynamics").data[0].embedding
check("openai_embeddings_batched_equals_alone", max(abs(a - b) for a, b in zip(single, vecs[1])) < 1e-5, "differs")
raw = c.embeddings.with_raw_response.create(model=model, input="Quantum chromodynamics", encoding_format="base64")
b64 = raw.http_response.json()["data"][0]["embedding"]
floats = list(struct.unpack("<%df" % (len(b64) * 3 // 4 // 4), base64.b64decode(b64)))
check("openai_embeddings_base64", len(floats) == len(single) and max(abs(a - b) for a, b in zip(floats, single))
      < 1e-6, len(floats))
ids = c.embeddings.create(model=model, input=[[1, 2, 3], [4, 5]])
check("openai_embeddings_token_ids", len(ids.data) == 2 and ids.usage.prompt_tokens == 5, ids.usage)
try:
    c.embeddings.create(model=model, input="")
    check("openai_embeddings_empty", False, "accepted")
except openai.BadRequestError as ex:
    check("openai_embeddings_empty", "empty" in str(ex), str(ex))

# echo with logprobs: the prompt's tokens come first with theirs (the first null, as OpenAI and vLLM), then the
# generated tokens' exactly as without echo; a prompt token's logprob is what the position before it predicts
prompt = "The capital of France is"
plain = c.completions.create(model=model, prompt=prompt, max_tokens=4, temperature=0, logprobs=3)
echo = c.completions.create(model=model, prompt=prompt, max_tokens=4, temperature=0, logprobs=3, echo=True)
lp, np_ = echo.choices[0].logprobs, echo.usage.prompt_tokens
gen = plain.choices[0].logprobs
check("openai_echo_logprobs_shape", len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs)
      == len(lp.text_offset) == np_ + echo.usage.completion_tokens and lp.token_logprobs[0] is None
      and lp.top_logprobs[0] is None and all(v <= 0 for v in lp.token_logprobs[1:])
      and all(len(t) in (3, 4) for t in lp.top_logprobs[1:]), lp)
check("openai_echo_logprobs_text", echo.choices[0].text == prompt + plain.choices[0].text
      and "".join(lp.tokens[:np_]) == prompt and lp.text_offset == [len("".join(lp.tokens[:k]))
                                                                     for k in range(len(lp.tokens))], lp)
check("openai_echo_logprobs_generated", lp.tokens[np_:] == gen.tokens and all(
    abs(a - b) < 1e-5 for a, b in zip(lp.token_logprobs[np_:], gen.token_logprobs)), (lp, gen))
req = urllib.request.Request("http://127.0.0.1:%d/tokenize" % port, json.dumps({"content": prompt}).encode(),
                             {"Content-Type": "application/json"})
ids = json.load(urllib.request.urlopen(req))["tokens"]
before = c.completions.create(model=model, prompt=ids[:-1], max_tokens=1, temperature=0, logprobs=20)
alts = before.choices[0].logprobs.top_logprobs[0]
check("openai_echo_logprobs_predicted", lp.tokens[np_ - 1] in alts
      and abs(alts[lp.tokens[np_ - 1]] - lp.token_logprobs[np_ - 1]) < 1e-4, (alts, lp.token_logprobs))
streamed = {"tokens": [], "token_logprobs": []}
text = ""
for chunk in c.completions.create(model=model, prompt=prompt, max_tokens=4, temperature=0, logprobs=3, echo=True,
                                  stream=True):
    if chunk.choices:
        text += chunk.choices[0].text
        if chunk.choices[0].logprobs:
            streamed["tokens"] += chunk.choices[0].logprobs.tokens
            streamed["token_logprobs"] += chunk.choices[0].logprobs.token_logprobs
check("openai_echo_logprobs_stream", text == echo.choices[0].text and streamed["tokens"] == lp.tokens and all(
    (a is None and b is None) or abs(a - b) < 1e-5 for a, b in zip(streamed["token_logprobs"], lp.token_logprobs)),
      (streamed, lp))
# max_tokens 0 with echo (how evaluation harnesses score a text): the prompt alone, its logprobs, nothing generated
score = c.completions.create(model=model, prompt=prompt, max_tokens=0, temperature=0, logprobs=3, echo=True)
slp = score.choices[0].logprobs
check("openai_echo_score_only", score.choices[0].text == prompt and score.usage.completion_tokens == 0
      and score.choices[0].finish_reason == "length" and slp.tokens == lp.tokens[:np_] and all(
          (a is None and b is None) or abs(a - b) < 1e-5 for a, b in zip(slp.token_logprobs, lp.token_logprobs)),
      score)
chunks = list(c.completions.create(model=model, prompt=prompt, max_tokens=0, logprobs=0, echo=True, stream=True,
                                   stream_options={"include_usage": True}))
check("openai_echo_score_only_stream", "".join(ch.choices[0].text for ch in chunks if ch.choices) == prompt
      and chunks[-1].usage.completion_tokens == 0, chunks)

# vLLM's ignore_eos and min_tokens (extra_body): greedy stops at the end-of-sequence token after n < 40 tokens;
# min_tokens n + 5 holds it back that long (the same text up to there), ignore_eos runs to exactly max_tokens
say = [{"role": "user", "content": "Say hi."}]
base = c.chat.completions.create(model=model, messages=say, max_tokens=40, temperature=0)
n = base.usage.completion_tokens
check("openai_eos_baseline", base.choices[0].finish_reason == "stop" and n + 5 < 40, base.usage)
held = c.chat.completions.create(model=model, messages=say, max_tokens=40, temperature=0,
                                 extra_body={"min_tokens": n + 5})
check("openai_min_tokens", held.usage.completion_tokens >= n + 5
      and held.choices[0].message.content.startswith(base.choices[0].message.content), held)
run = c.chat.completions.create(model=model, messages=say, max_tokens=40, temperature=0,
                                extra_body={"ignore_eos": True})
check("openai_ignore_eos", run.usage.completion_tokens == 40 and run.choices[0].finish_reason == "length", run.usage)
try:
    c.completions.create(model=model, prompt="x", max_tokens=4, extra_body={"min_tokens": 5})
    check("openai_min_tokens_over_max", False, "accepted")
except openai.BadRequestError as ex:
    check("openai_min_tokens_over_max", "min_tokens" in str(ex), str(ex))

# n > 1: the choices indexed 0 .. n-1, choice i the same as one request with seed + i; usage counts the prompt once
long_prompt = "Once upon a time, in a village by the sea, there lived an old fisherman who"
multi = c.completions.create(model=model, prompt=long_prompt, max_tokens=6, n=3, seed=7, temperature=1.0,
                             extra_body={"ignore_eos": True})
alone = [c.completions.create(model=model, prompt=long_prompt, max_tokens=6, seed=7 + i, temperature=1.0,
                              extra_body={"ignore_eos": True}) for i in range(3)]
check("openai_n_choices", [ch.index for ch in multi.choices] == [0, 1, 2]
      and [ch.text for ch in multi.choices] == [a.choices[0].text for a in alone]
      and multi.usage.completion_tokens == 18 and multi.usage.prompt_tokens == alone[0].usage.prompt_tokens,
      (multi, [a.choices[0].text for a in alone]))
chat_multi = c.chat.completions.create(model=model, messages=say, max_tokens=5, n=2, seed=3, temperature=1.0)
chat_alone = c.chat.completions.create(model=model, messages=say, max_tokens=5, seed=4, temperature=1.0)
check("openai_chat_n", len(chat_multi.choices) == 2 and chat_multi.choices[1].index == 1
      and chat_multi.choices[1].message.content == chat_alone.choices[0].message.content, chat_multi)
try:
    list(c.completions.create(model=model, prompt="x", max_tokens=2, n=2, stream=True))
    check("openai_n_stream_refused", False, "accepted")
except openai.BadRequestError as ex:
    check("openai_n_stream_refused", "'n'" in str(ex) and "stream" in str(ex), str(ex))
