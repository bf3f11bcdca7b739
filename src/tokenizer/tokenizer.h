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

/* Chat templates. */
typedef enum ChatTemplate { CHAT_CHATML, CHAT_LLAMA3 } ChatTemplate;
typedef struct ChatMessage {
  const char *role; /* "system", "user", "assistant" */
  const char *content;
} ChatMessage;
/* Which template a model uses, from its Jinja template text (tokenizer_config.json or GGUF
 * tokenizer.chat_template) when known; else from the vocabulary (<|im_start|> -> ChatML,
 * <|start_header_id|> -> Llama 3). */
ChatTemplate tokenizer_chat_template(const Tokenizer *t);
/* Renders messages as the model expects, ending with the assistant header when add_generation_prompt. */
int chat_render(const Tokenizer *t, ChatTemplate tpl, const ChatMessage *msgs, int n, int add_generation_prompt,
                StrBuf *out, Diag *d);
#endif
