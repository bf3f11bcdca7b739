#!/usr/bin/env bash
set -u
source "$(dirname "$0")/cli_lib.sh"
# lathe chat (piped and, through tmux, interactive), Ctrl-C in generate and chat, the context overflow
# of a long conversation, and make install / uninstall. Most tests run on a tiny chat model made from
# the llama fixture (tests/make_chat_fixture.py: printable one-line replies, no eos), so each takes a
# second or less; the default model's tests are skipped without it.
export LATHE_CACHE_DIR=${LATHE_CACHE_DIR:-$tmp/cache}
CM=$tmp/chatmodel
python3 tests/make_chat_fixture.py tests/fixtures/models/llama tests/fixtures/tokenizer/gpt2_small/tokenizer.json "$CM"
G=(--greedy --ignore-eos)

# ntok SYSTEM MESSAGE: the tokens of the chat prompt for one message (after an optional system prompt)
ntok() {
  local sys=()
  [ -n "$1" ] && sys=(--system "$1")
  "$LATHE" generate "$CM" --chat "${sys[@]}" --prompt "$2" --max-tokens 0 --json -q </dev/null |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin)["prompt_tokens"]))'
}
# prompt_counts FILE: the "prompt N tokens" of each statistics line, space-separated
prompt_counts() { grep -o 'prompt [0-9]* tokens' "$1" | awk '{printf "%s%s", s, $2; s=" "}'; }
no_sanitizer() { ! grep -q -E 'Sanitizer|runtime error' "$@"; }

# ---- generate --chat prints only the reply, not the prompt it was given --------------------------
if run_lathe generate_chat_reply_only generate "$CM" --chat --prompt "hello there" "${G[@]}" --max-tokens 6 -q; then
  cp "$tmp/out" "$tmp/plain"
  if run_lathe generate_chat_reply_only generate "$CM" --chat --prompt "hello there" "${G[@]}" --max-tokens 6 -q --json; then
    want=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["text"])' <"$tmp/out")
    if [ "$(cat "$tmp/plain")" = "$want" ] && [ -n "$want" ]; then pass generate_chat_reply_only
    else fail generate_chat_reply_only "printed '$(head -c 200 "$tmp/plain")', the reply is '$want'"; fi
  fi
fi

# ---- piped chat: /commands ----------------------------------------------------------------------
printf '%s\n' "hello" "/system Be terse." "/system" "/help" "/frob" "/reset" "again" "/bye" "never sent" >"$tmp/in"
if run_lathe chat_piped_commands chat "$CM" "${G[@]}" --max-tokens 4; then
  counts=$(prompt_counts "$tmp/err")
  want="$(ntok "" hello) $(ntok "Be terse." again)" # /reset keeps the system prompt /system set
  if [ "$counts" != "$want" ]; then fail chat_piped_commands "prompt tokens per turn '$counts', expected '$want'"
  elif ! grep -qx 'Be terse.' "$tmp/out"; then fail chat_piped_commands "/system did not show the system prompt"
  elif ! grep -q '/reset, /clear' "$tmp/out"; then fail chat_piped_commands "/help printed no commands"
  elif ! grep -q "unknown command '/frob'" "$tmp/err"; then fail chat_piped_commands "no error for /frob"
  else pass chat_piped_commands; fi
fi

: >"$tmp/in"
if run_lathe chat_empty_input chat "$CM" -q; then
  if [ ! -s "$tmp/out" ] && [ ! -s "$tmp/err" ]; then pass chat_empty_input; else fail chat_empty_input "printed $(head -c 200 "$tmp/out" "$tmp/err")"; fi
fi

# ---- piped chat: """ multi-line messages --------------------------------------------------------
printf '%s\n' '"""' 'line one' '' 'line three' '"""' /reset '"""one liner"""' /reset '"""first' 'middle' 'last"""' >"$tmp/in"
if run_lathe chat_multiline chat "$CM" "${G[@]}" --max-tokens 2; then
  counts=$(prompt_counts "$tmp/err")
  want="$(ntok "" "$(printf 'line one\n\nline three')") $(ntok "" "one liner") $(ntok "" "$(printf 'first\nmiddle\nlast')")"
  if [ "$counts" = "$want" ] && [ "$(grep -c . "$tmp/out")" -eq 3 ]; then pass chat_multiline
  else fail chat_multiline "prompt tokens per message '$counts', expected '$want'; replies: $(head -c 200 "$tmp/out")"; fi
fi

# ---- context overflow: the oldest turns go, the system prompt stays -----------------------------
# --ctx 96 with --max-tokens 8 leaves 88 tokens for a prompt. Four short turns fill it; the long last
# message fits only with the system prompt alone, so the chat must drop every earlier turn for it.
S="Be terse."
long="please tell me about the history of the apples and oranges in the old town of the north"
printf '%s\n' "one two three" "four five six" "seven eight nine" "ten eleven twelve" "$long" /system >"$tmp/in"
if run_lathe chat_context_overflow chat "$CM" "${G[@]}" --max-tokens 8 --ctx 96 --system "$S"; then
  read -r -a c <<<"$(prompt_counts "$tmp/err")"
  last=$(ntok "$S" "$long")
  over=1
  for x in "${c[@]}"; do [ "$x" -le 88 ] || over=0; done
  if [ "${#c[@]}" -ne 5 ]; then fail chat_context_overflow "${#c[@]} of 5 messages answered: $(grep error "$tmp/err")"
  elif ! grep -q 'outgrew the context' "$tmp/err"; then fail chat_context_overflow "no message about dropped turns"
  elif [ "$over" -ne 1 ]; then fail chat_context_overflow "a prompt over 88 tokens: ${c[*]}"
  elif [ "${c[4]}" -ne "$last" ]; then fail chat_context_overflow "last prompt ${c[4]} tokens, system + message alone is $last"
  elif [ "$(tail -1 "$tmp/out")" != "$S" ]; then fail chat_context_overflow "system prompt now '$(tail -1 "$tmp/out")'"
  else pass chat_context_overflow; fi
fi
# A message longer than the whole context: one error, the chat goes on with its history.
huge=$(printf 'word %.0s' $(seq 60))
printf '%s\n' "hello" "$huge" "again" >"$tmp/in"
if run_lathe chat_message_too_long chat "$CM" "${G[@]}" --max-tokens 4 --ctx 64; then
  read -r -a c <<<"$(prompt_counts "$tmp/err")"
  if [ "${#c[@]}" -eq 2 ] && grep -q 'does not fit the context' "$tmp/err" && [ "${c[1]}" -gt "$(ntok "" again)" ]
  then pass chat_message_too_long; else fail chat_message_too_long "prompts ${c[*]}; $(grep error "$tmp/err")"; fi
fi
rm -f "$tmp/in"

# ---- Ctrl-C in generate: the completion stops, the statistics are printed, exit 130 --------------
# wait_for SECONDS CONDITION...: polls the condition every 0.1 s
wait_for() {
  local s=$1; shift
  for _ in $(seq $((s * 10))); do "$@" && return 0; sleep 0.1; done
  return 1
}
# sigint_generate ARGS...: starts generate, sends SIGINT once tokens flow (text: the first one is on
# stdout; --json prints at the end, so a second after the model loaded), and waits for it to end.
sigint_generate() {
  "$LATHE" generate "$CM" --prompt hi "${G[@]}" --max-tokens 100000 --ctx 100000 "$@" </dev/null >"$tmp/out" 2>"$tmp/err" &
  local pid=$!
  case " $* " in
    *" --json "*) wait_for 30 grep -q 'loaded in' "$tmp/err" && sleep 1 ;;
    *) wait_for 30 test -s "$tmp/out" ;;
  esac
  kill -INT $pid
  wait_for 20 eval "! kill -0 $pid 2>/dev/null" || kill -KILL $pid
  wait $pid
}
sigint_generate
rc=$?
if ! no_sanitizer "$tmp/err"; then fail generate_sigint "sanitizer report: $(head -3 "$tmp/err")"
elif [ $rc -ne 130 ]; then fail generate_sigint "exit $rc, expected 130"
elif ! grep -q -E 'generated [0-9]+ tokens.*stop: interrupted' "$tmp/err"; then fail generate_sigint "stderr: $(tail -2 "$tmp/err")"
elif [ "$(tail -c 1 "$tmp/out" | od -An -c | tr -d ' ')" != '\n' ] || [ "$(wc -c <"$tmp/out")" -lt 20 ]; then fail generate_sigint "stdout: $(tail -c 100 "$tmp/out")"
else pass generate_sigint; fi
sigint_generate --json
rc=$?
if [ $rc -eq 130 ] && no_sanitizer "$tmp/err"; then json_ok generate_sigint_json "j['stop_reason'] == 'interrupted' and len(j['tokens']) > 0"
else fail generate_sigint_json "exit $rc: $(head -3 "$tmp/err")"; fi

# ---- the interactive chat, driven through tmux --------------------------------------------------
# Each session on a server of its own: a new session on a server still shutting down can fail.
nserver=0
new_server() { nserver=$((nserver + 1)); TM=(tmux -L "lathe-chat-test-$$-$nserver"); }
new_server
# pane: the screen's non-empty lines
pane() { "${TM[@]}" capture-pane -p -t chat 2>/dev/null | grep -v '^$'; }
at_prompt() { [ "$(pane | tail -1)" = "> " ] || [ "$(pane | tail -1)" = ">" ]; }
nstats() { [ "$(grep -c 'stop: interrupted' "$tmp/tmux.err")" -ge "$1" ]; }
exited() { grep -q "LATHE_EXIT=" "$tmp/tmux.status" 2>/dev/null; }
start_chat() {
  new_server
  rm -f "$tmp/tmux.err" "$tmp/tmux.status"
  "${TM[@]}" new-session -d -s chat -x 120 -y 40 \
    "$LATHE chat $CM ${G[*]} --max-tokens 100000 --ctx 100000 2>$tmp/tmux.err; echo LATHE_EXIT=\$? >$tmp/tmux.status; sleep 30"
  wait_for 20 at_prompt
}
if ! command -v tmux >/dev/null; then
  for n in chat_tty_reply chat_tty_ctrl_c chat_tty_history chat_tty_ctrl_d chat_tty_ctrl_c_exits chat_tty_multiline_ctrl_c; do skip $n "no tmux"; done
else
  if ! start_chat; then
    fail chat_tty_reply "no prompt: $(pane | tail -3) $(head -3 "$tmp/tmux.err")"
  else
    "${TM[@]}" send-keys -t chat "hello there" Enter
    sleep 0.5
    if "${TM[@]}" capture-pane -p -S - -t chat | grep -A1 '^> hello there' | tail -1 | grep -q -E '[a-z]{3}'; then pass chat_tty_reply
    else fail chat_tty_reply "screen: $(pane | tail -3)"; fi
    "${TM[@]}" send-keys -t chat C-c
    if wait_for 5 nstats 1 && wait_for 5 at_prompt; then
      "${TM[@]}" send-keys -t chat "second message" Enter
      sleep 0.3
      "${TM[@]}" send-keys -t chat C-c
      wait_for 5 nstats 2 && wait_for 5 at_prompt
      read -r -a c <<<"$(prompt_counts "$tmp/tmux.err")"
      # the second prompt holds the first exchange: the message, the partial reply, the new message
      if [ "${#c[@]}" -eq 2 ] && [ "${c[1]}" -gt $((c[0] + $(ntok "" "second message"))) ]; then pass chat_tty_ctrl_c
      else fail chat_tty_ctrl_c "prompt tokens ${c[*]}; screen: $(pane | tail -2)"; fi
    else
      fail chat_tty_ctrl_c "Ctrl-C did not return to the prompt: $(pane | tail -2); $(tail -2 "$tmp/tmux.err")"
    fi
    "${TM[@]}" send-keys -t chat Up
    sleep 0.3
    l1=$(pane | tail -1)
    "${TM[@]}" send-keys -t chat Up
    sleep 0.3
    l2=$(pane | tail -1)
    if [ "$l1" = "> second message" ] && [ "$l2" = "> hello there" ]; then pass chat_tty_history
    else fail chat_tty_history "Up shows '$l1', then '$l2'"; fi
    "${TM[@]}" send-keys -t chat C-u C-d
    if wait_for 10 exited && grep -q LATHE_EXIT=0 "$tmp/tmux.status" && no_sanitizer "$tmp/tmux.err"; then pass chat_tty_ctrl_d
    else fail chat_tty_ctrl_d "$(cat "$tmp/tmux.status" 2>/dev/null); $(pane | tail -2); $(grep -m3 -E 'ERROR|Sanitizer' "$tmp/tmux.err")"; fi
  fi
  "${TM[@]}" kill-server 2>/dev/null
  # Ctrl-C during a reply, then Ctrl-C at the prompt, leaves.
  if ! start_chat; then
    fail chat_tty_ctrl_c_exits "no prompt: $(pane | tail -3)"
  else
    "${TM[@]}" send-keys -t chat "hello" Enter
    sleep 0.3
    "${TM[@]}" send-keys -t chat C-c
    wait_for 5 nstats 1 && wait_for 5 at_prompt
    "${TM[@]}" send-keys -t chat C-c
    if wait_for 10 exited && grep -q LATHE_EXIT=0 "$tmp/tmux.status" && no_sanitizer "$tmp/tmux.err"; then pass chat_tty_ctrl_c_exits
    else fail chat_tty_ctrl_c_exits "$(cat "$tmp/tmux.status" 2>/dev/null); $(pane | tail -2)"; fi
  fi
  "${TM[@]}" kill-server 2>/dev/null
  # A """ message continues at a "... " prompt; Ctrl-C there leaves without sending it.
  if ! start_chat; then
    fail chat_tty_multiline_ctrl_c "no prompt: $(pane | tail -3)"
  else
    "${TM[@]}" send-keys -t chat '"""' Enter 'first line' Enter
    sleep 0.3
    l1=$(pane | tail -1)
    "${TM[@]}" send-keys -t chat C-c
    if wait_for 10 exited && grep -q LATHE_EXIT=0 "$tmp/tmux.status" && [ "$l1" = "... " -o "$l1" = "..." ] &&
        ! grep -q 'prompt [0-9]* tokens' "$tmp/tmux.err"; then pass chat_tty_multiline_ctrl_c
    else fail chat_tty_multiline_ctrl_c "continuation line '$l1'; $(cat "$tmp/tmux.status" 2>/dev/null); $(tail -2 "$tmp/tmux.err")"; fi
  fi
  "${TM[@]}" kill-server 2>/dev/null
fi

# ---- the default model: a multi-line question and a real answer ---------------------------------
if [ ! -f "$DM" ]; then
  skip chat_default_model "no default model at $DM"
else
  printf '%s\n' '"""' 'What is the capital' 'of France?' '"""' >"$tmp/in"
  if run_lathe chat_default_model chat --greedy --max-tokens 7 -q; then
    if grep -q Paris "$tmp/out"; then pass chat_default_model; else fail chat_default_model "reply: $(head -c 200 "$tmp/out")"; fi
  fi
  rm -f "$tmp/in"
fi

# ---- the man page and the completions know every flag and environment variable -----------------
flags=$(grep -o -h -E '"--?[a-z][a-z0-9-]*"' src/cli/*.c | tr -d '"' | sort -u)
man_text=$(sed 's/\\-/-/g' doc/lathe.1)
missing=
for f in $flags; do grep -q -e "$f\b" <<<"$man_text" || missing+=" $f"; done
if [ -z "$missing" ]; then pass man_page_flags; else fail man_page_flags "doc/lathe.1 lacks$missing"; fi
missing=
for f in $flags; do
  case $f in --help | -h | --version) continue ;; esac # lathe's own, completed at the first word
  grep -q -e "$f\b" contrib/completions/lathe.bash || missing+=" bash:$f"
  grep -q -e "$f\b" contrib/completions/_lathe || missing+=" zsh:$f"
done
if [ -z "$missing" ]; then pass completion_flags; else fail completion_flags "lacking$missing"; fi
env_section=$(sed -n '/^\.SH ENVIRONMENT/,/^\.SH FILES/p' doc/lathe.1)
missing=
for v in $("$LATHE" env --json | python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)))'); do # the settings table
  grep -q -x -e ".B $v" <<<"$env_section" || missing+=" $v"
done
if [ -z "$missing" ]; then pass man_page_environment; else fail man_page_environment "ENVIRONMENT lacks$missing"; fi

# ---- make install / uninstall into a DESTDIR ----------------------------------------------------
D=$tmp/dest
installed="usr/bin/lathe usr/share/man/man1/lathe.1 usr/share/bash-completion/completions/lathe usr/share/zsh/site-functions/_lathe"
if ! env -u MAKEFLAGS -u MAKELEVEL make -s install DESTDIR="$D" PREFIX=/usr >"$tmp/make.out" 2>&1; then
  fail make_install "make install: $(tail -3 "$tmp/make.out")"
else
  missing=
  for f in $installed; do [ -f "$D/$f" ] || missing+=" $f"; done
  extra=$(cd "$D" && find . -type f | sed 's|^\./||' | grep -v -x -F "$(tr ' ' '\n' <<<"$installed")")
  if [ -n "$missing$extra" ]; then fail make_install "missing:$missing; unexpected: $extra"
  elif [ ! -x "$D/usr/bin/lathe" ]; then fail make_install "usr/bin/lathe is not executable"
  else pass make_install; fi
  # the installed binary from PATH, outside the source tree: --help and a README example
  root=$PWD
  if (cd "$tmp" && PATH="$D/usr/bin:$PATH" lathe --help | grep -q '^usage: lathe' &&
      PATH="$D/usr/bin:$PATH" lathe run -e "x: f32[seq, 64]; y = softmax(x, -1)" --dim seq=7 --check >"$tmp/run.out" 2>&1)
  then pass installed_runs_from_path; else fail installed_runs_from_path "$(head -3 "$tmp/run.out")"; fi
  if [ -f "$DM" ]; then
    if (cd "$tmp" && PATH="$D/usr/bin:$PATH" lathe generate --prompt "The capital of France is" --greedy --max-tokens 4 2>/dev/null |
        grep -q Paris); then pass installed_generate_default_model; else fail installed_generate_default_model "no Paris"; fi
  else
    skip installed_generate_default_model "no default model at $DM"
  fi
  cd "$root"
  # the man page renders, without groff warnings
  if ! command -v groff >/dev/null; then skip man_page_renders "no groff"
  elif groff -man -Tutf8 -ww -z "$D/usr/share/man/man1/lathe.1" 2>"$tmp/groff.err" && [ ! -s "$tmp/groff.err" ] &&
      MANWIDTH=100 man -l "$D/usr/share/man/man1/lathe.1" 2>/dev/null | grep -q -E '^ENVIRONMENT'; then
    pass man_page_renders
  else fail man_page_renders "$(head -3 "$tmp/groff.err")"; fi
  # bash: the completion function, called as bash calls it
  out=$(bash -c 'source "$1"
    COMP_WORDS=(lathe gen); COMP_CWORD=1; _lathe; echo "${COMPREPLY[*]}"
    COMP_WORDS=(lathe generate --max-t); COMP_CWORD=2; _lathe; echo "${COMPREPLY[*]}"
    COMP_WORDS=(lathe compile --ir l); COMP_CWORD=3; _lathe; echo "${COMPREPLY[*]}"' _ "$D/usr/share/bash-completion/completions/lathe")
  if [ "$out" = "$(printf 'generate\n--max-tokens\nloop')" ]; then pass bash_completion
  else fail bash_completion "completions: $(tr '\n' '|' <<<"$out")"; fi
  # zsh: typed into an interactive zsh through tmux, Tab completes
  if ! command -v zsh >/dev/null || ! command -v tmux >/dev/null; then skip zsh_completion "no zsh or tmux"
  else
    new_server
    "${TM[@]}" new-session -d -s zsh -x 120 -y 20 "env -i TERM=xterm PATH=/usr/bin:/bin zsh -f"
    sleep 0.3
    "${TM[@]}" send-keys -t zsh "fpath=($D/usr/share/zsh/site-functions \$fpath); autoload -U compinit; compinit -u -D; clear" Enter
    sleep 0.5
    "${TM[@]}" send-keys -t zsh "lathe gen" Tab
    sleep 0.5
    "${TM[@]}" send-keys -t zsh " --max-t" Tab
    sleep 0.5
    line=$("${TM[@]}" capture-pane -p -t zsh | grep 'lathe' | tail -1)
    if [[ $line == *"lathe generate --max-tokens"* ]]; then pass zsh_completion; else fail zsh_completion "line: $line"; fi
    "${TM[@]}" kill-server 2>/dev/null
  fi
fi
if env -u MAKEFLAGS -u MAKELEVEL make -s uninstall DESTDIR="$D" PREFIX=/usr >"$tmp/make.out" 2>&1 &&
    [ -z "$(find "$D" -type f 2>/dev/null)" ]; then pass make_uninstall
else fail make_uninstall "left: $(find "$D" -type f 2>/dev/null | head -5) $(tail -2 "$tmp/make.out")"; fi
