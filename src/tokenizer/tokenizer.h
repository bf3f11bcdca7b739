/* Byte-level BPE tokenizer (GPT-2 style), from a Hugging Face tokenizer.json or GGUF metadata, with
 * the GPT-2, Llama 3 and Qwen2 (and SmolLM: digits split one by one) pre-tokenizer patterns, added
 * and special tokens, and decoding that copes with tokens that split multi-byte characters. */
#ifndef LATHE_TOKENIZER_H
#define LATHE_TOKENIZER_H
#include <stdint.h>
#include "../base/diag.h"
#include "../base/strbuf.h"

typedef struct Tokenizer Tokenizer;
struct GgufFile;

Tokenizer *tokenizer_from_hf_dir(const char *dir, Diag *d); /* tokenizer.json (+ tokenizer_config.json) */
Tokenizer *tokenizer_from_gguf(const struct GgufFile *f, Diag *d);
void tokenizer_free(Tokenizer *t);

/* Encodes text; special/added tokens written literally in the text (e.g. "<|im_start|>") become
 * their ids. add_bos: prepend the BOS token if the tokenizer has one and is configured to add it.
 * *ids is malloc'ed (caller frees). */
int tokenizer_encode(const Tokenizer *t, const char *text, int add_bos, int32_t **ids, int *n, Diag *d);
int tokenizer_vocab_size(const Tokenizer *t);
int tokenizer_token_id(const Tokenizer *t, const char *token); /* -1 if absent */
int tokenizer_bos(const Tokenizer *t);                         /* -1 if none */
int tokenizer_eos(const Tokenizer *t);                         /* -1 if none */
int tokenizer_is_special(const Tokenizer *t, int32_t id);

/* Incremental decoding: bytes of a multi-byte character split across tokens are held back until the
 * character is complete. decode_step appends complete UTF-8 text for `id` to out; decode_flush emits
 * what is left (invalid bytes as U+FFFD). Special tokens decode to their text unless skip_special. */
typedef struct DecodeState {
  unsigned char pending[8];
  int npending;
} DecodeState;
void tokenizer_decode_step(const Tokenizer *t, DecodeState *s, int32_t id, int skip_special, StrBuf *out);
void tokenizer_decode_flush(DecodeState *s, StrBuf *out);
/* Whole-sequence decode (convenience over the above). */
void tokenizer_decode(const Tokenizer *t, const int32_t *ids, int n, int skip_special, StrBuf *out);

/* Chat templates: the model's own Jinja template, executed (chat.c, jinja*.c). */
typedef struct ChatMessage {
  const char *role; /* "system", "user", "assistant" */
  const char *content;
} ChatMessage;
/* The model's Jinja chat template (GGUF tokenizer.chat_template, tokenizer_config.json's chat_template or
 * chat_template.jinja), or NULL when it ships none. */
const char *tokenizer_chat_template(const Tokenizer *t);
/* Runs a Jinja chat template as transformers' apply_chat_template does, over messages (each with a string
 * content) and the variables add_generation_prompt, bos_token, eos_token (NULL: ""), tools = none. Appends
 * the text to out. Errors (syntax, an unknown filter, raise_exception's message, a limit) carry the
 * template's line and column. */
int chat_template_render(const char *template_text, const ChatMessage *msgs, int n, int add_generation_prompt,
                         const char *bos, const char *eos, StrBuf *out, Diag *d);
/* The prompt for messages: template_text (NULL: the model's own template) with the tokenizer's BOS and EOS
 * text. A model without any template gets ChatML when its vocabulary has <|im_start|>, else an error. The
 * text holds every special token the template writes (encode it without adding a BOS). */
int chat_render(const Tokenizer *t, const char *template_text, const ChatMessage *msgs, int n,
                int add_generation_prompt, StrBuf *out, Diag *d);
#endif
