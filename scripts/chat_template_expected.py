#!/usr/bin/env python3
"""Renders every template of tests/fixtures/chat_templates/corpus.json over every message list of
cases.json with Python's jinja2 exactly as transformers' apply_chat_template does (an
ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the loopcontrols extension, its own
tojson, raise_exception and strftime_now), and writes NAME.expected.json beside the templates: per case
{"text": ...}, or {"raise": message} for raise_exception, or {"error": message} for any other failure.
strftime_now sees a fixed time (2026-03-14 09:26:53) so the output is reproducible; tests/test_jinja.c
gives the C interpreter the same one. Run by scripts/chat-template-expected.sh (jinja2 in a venv)."""
import json
import os
import sys
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

FIXED_NOW = datetime(2026, 3, 14, 9, 26, 53)


class Raised(Exception):
    pass


def environment():
    def raise_exception(message):
        raise Raised(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return FIXED_NOW.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures",
                                                           "chat_templates")
    corpus = json.load(open(os.path.join(d, "corpus.json")))
    cases = json.load(open(os.path.join(d, "cases.json")))
    env = environment()
    for entry in corpus:
        with open(os.path.join(d, entry["name"] + ".jinja"), encoding="utf-8") as f:
            template = env.from_string(f.read())
        out = {}
        for case in cases:
            try:
                text = template.render(messages=case["messages"], tools=None, documents=None,
                                       add_generation_prompt=case["agp"], bos_token=entry["bos"],
                                       eos_token=entry["eos"])
                out[case["name"]] = {"text": text}
            except Raised as e:
                out[case["name"]] = {"raise": str(e)}
            except Exception as e:  # noqa: BLE001 - any failure of the template is an expected error
                out[case["name"]] = {"error": f"{type(e).__name__}: {e}"}
        with open(os.path.join(d, entry["name"] + ".expected.json"), "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1, ensure_ascii=False)
            f.write("\n")
        print(f"{entry['name']}: {sum('text' in v for v in out.values())} texts, "
              f"{sum('text' not in v for v in out.values())} errors")


if __name__ == "__main__":
    main()
