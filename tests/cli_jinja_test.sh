#!/usr/bin/env bash
set -u
source "$(dirname "$0")/cli_lib.sh"
# The chat template is run, not guessed: --chat-template FILE for generate and chat, the model's own template
# through generate --chat, and the errors of a template that cannot run (one line with FILE:LINE:COL).
export LATHE_CACHE_DIR=${LATHE_CACHE_DIR:-$tmp/cache}
T=tests/fixtures/chat_templates
printf '%s' '{{ messages[-1].content | upper }}{% if add_generation_prompt %} >>{% endif %}' >"$tmp/upper.jinja"
printf '%s\n' 'line one' '{{ messages | bogus }}' >"$tmp/bad.jinja"
printf '%s' '{% for m in messages %}{{ m.role }}: {{ m.content }}|{% endfor %}' >"$tmp/roles.jinja"

expect_error chat_template_missing_file "cannot open --chat-template $tmp/nope.jinja" -- \
  generate "$DM" --chat-template "$tmp/nope.jinja" --prompt hi
if [ ! -f "$DM" ]; then
  for n in chat_template_file_is_run chat_template_implies_chat chat_template_unknown_filter \
    chat_template_raise_exception chat_template_model_own chat_template_in_chat; do
    skip "$n" "no default model at $DM"
  done
  exit 0
fi

# The template's text is what gets encoded: the same tokens as that text given as a plain prompt.
if run_lathe chat_template_file_is_run generate "$DM" --prompt "hello there" --chat-template "$tmp/upper.jinja" \
  --max-tokens 0 --json -q; then
  got=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["prompt_tokens"])' <"$tmp/out")
  if run_lathe chat_template_file_is_run generate "$DM" --prompt "HELLO THERE >>" --max-tokens 0 --json -q; then
    want=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["prompt_tokens"])' <"$tmp/out")
    if [ "$got" = "$want" ]; then pass chat_template_file_is_run
    else fail chat_template_file_is_run "template prompt $got, plain text prompt $want"; fi
  fi
fi
# --chat-template implies --chat, so --system is accepted and reaches the template as a system message.
if run_lathe chat_template_implies_chat generate "$DM" --system "Be brief." --prompt "Hi" \
  --chat-template "$tmp/roles.jinja" --max-tokens 0 --json -q; then
  got=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["prompt_tokens"])' <"$tmp/out")
  if run_lathe chat_template_implies_chat generate "$DM" --prompt "system: Be brief.|user: Hi|" --max-tokens 0 --json -q; then
    want=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["prompt_tokens"])' <"$tmp/out")
    if [ "$got" = "$want" ]; then pass chat_template_implies_chat
    else fail chat_template_implies_chat "template prompt $got, plain text prompt $want"; fi
  fi
fi
expect_error chat_template_unknown_filter "$tmp/bad.jinja:2:13: error: unknown filter 'bogus'" -- \
  generate "$DM" --chat-template "$tmp/bad.jinja" --prompt hi -q
expect_error chat_template_raise_exception "gemma2.jinja:1:[0-9]+: error: raise_exception: System role not supported" -- \
  generate "$DM" --chat-template "$T/gemma2.jinja" --system "sys" --prompt hi -q
# SmolLM2's own template (from the GGUF) adds its default system prompt when none is given.
if run_lathe chat_template_model_own generate "$DM" --chat --prompt "Hi" --max-tokens 0 --json -q; then
  got=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["prompt_tokens"])' <"$tmp/out")
  text=$'<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n'
  if run_lathe chat_template_model_own generate "$DM" --prompt "$text" --max-tokens 0 --json -q; then
    want=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["prompt_tokens"])' <"$tmp/out")
    if [ "$got" = "$want" ]; then pass chat_template_model_own
    else fail chat_template_model_own "chat prompt $got, the template's text gives $want"; fi
  fi
fi
# lathe chat runs the given template each turn (its error is the same one line).
printf 'hi\n' >"$tmp/in"
"$LATHE" chat "$DM" --chat-template "$tmp/bad.jinja" -q <"$tmp/in" >"$tmp/out" 2>"$tmp/err"
if grep -q "bad.jinja:2:13: error: unknown filter 'bogus'" "$tmp/err"; then pass chat_template_in_chat
else fail chat_template_in_chat "stderr: $(head -c 300 "$tmp/err")"; fi
rm -f "$tmp/in"
