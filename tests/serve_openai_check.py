"""`lathe serve` through the official `openai` Python client (run by tests/cli_serve_test.sh in a venv).

    serve_openai_check.py PORT MODEL GENERATE_JSON

Prints "ok NAME" or "FAIL NAME: why" per check."""
import json
import sys

import openai

port, model, gen = int(sys.argv[1]), sys.argv[2], json.load(open(sys.argv[3]))


def check(name, cond, why):
    print(("ok " + name) if cond else "FAIL %s: %s" % (name, why), flush=True)


c = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % port, api_key="unused", max_retries=0)
n = len(gen["tokens"])
r = c.completions.create(model=model, prompt="The capital of France is", max_tokens=n, temperature=0)
check("openai_completion", r.choices[0].text == gen["text"] and r.usage.completion_tokens == n,
      "%r, usage %s" % (r.choices[0].text, r.usage))
check("openai_models", [m.id for m in c.models.list()] == [model], "models")
msgs = [{"role": "user", "content": "Say hello."}]
whole = c.chat.completions.create(model=model, messages=msgs, max_tokens=4, temperature=0)
parts = []
usage = None
for chunk in c.chat.completions.create(model=model, messages=msgs, max_tokens=4, temperature=0, stream=True,
                                       stream_options={"include_usage": True}):
    if chunk.choices:
        parts.append(chunk.choices[0].delta.content or "")
    if chunk.usage:
        usage = chunk.usage
check("openai_chat_stream", "".join(parts) == whole.choices[0].message.content and usage
      and usage.completion_tokens == whole.usage.completion_tokens,
      "%r vs %r, usage %s" % ("".join(parts), whole.choices[0].message.content, usage))
try:
    c.completions.create(model=model, prompt="x", max_tokens=1, n=17)
    check("openai_bad_request", False, "n=17 was accepted")
except openai.BadRequestError as e:
    check("openai_bad_request", e.status_code == 400 and "'n'" in str(e), str(e))
