/* Private to src/tokenizer: the Tokenizer's representation, shared by the loaders (load_hf.c,
 * load_gguf.c), the encoder (bpe.c, pretokenize.c, encode.c), decode.c and chat.c. */
#ifndef LATHE_TOKENIZER_INTERNAL_H
#define LATHE_TOKENIZER_INTERNAL_H
#include <stddef.h>
#include <stdint.h>
#include "../base/arena.h"
#include "tokenizer.h"

#define TOK_FLAG_ADDED 1   /* matched literally in the input; decodes to its raw text */
#define TOK_FLAG_SPECIAL 2 /* control token: skipped by decode when skip_special */

/* Open-addressing hash map from a byte string to an id (the vocabulary). */
typedef struct StrIdMap {
  const char **keys;
  uint32_t *lens;
  int32_t *vals;
  size_t cap, count;
} StrIdMap;

/* Merge table: (left id, right id) -> rank and merged id. */
typedef struct MergeMap {
  uint64_t *keys; /* (left << 32 | right) + 1; 0 = empty slot */
  int32_t *rank, *merged;
  size_t cap, count;
} MergeMap;

/* How a Split pre-tokenizer treats its matches (as in HF tokenizers). */
typedef enum SplitBehavior {
  SPLIT_ISOLATED,
  SPLIT_REMOVED,
  SPLIT_MERGED_PREV,
  SPLIT_MERGED_NEXT,
  SPLIT_CONTIGUOUS
} SplitBehavior;

typedef enum PreStepKind { PRE_SPLIT, PRE_BYTELEVEL } PreStepKind;
typedef struct PreStep {
  PreStepKind kind;
  void *re; /* pcre2_code* for PRE_SPLIT, and for PRE_BYTELEVEL with use_regex (the GPT-2 pattern); else NULL */
  SplitBehavior behavior;
  int invert;
  int add_prefix_space; /* PRE_BYTELEVEL */
} PreStep;

typedef enum Normalization { NORM_NONE, NORM_NFC, NORM_NFD, NORM_NFKC, NORM_NFKD } Normalization;

struct Tokenizer {
  Arena *arena;     /* token strings, tables */
  int vocab_size;   /* max id + 1 */
  const char **tok; /* id -> token string as stored (byte-level form for normal tokens); NULL for holes */
  uint32_t *tok_len;
  unsigned char *flags;
  StrIdMap vocab;
  MergeMap merges;
  int32_t byte_id[256]; /* id of each byte's single-character token, -1 if absent */
  int ignore_merges;    /* a piece that is itself a token is emitted whole (Llama 3) */
  /* Added tokens, sorted by length descending, so the first match at a position is the longest. */
  int32_t *added;
  int nadded;
  unsigned char added_first[256]; /* 1 if some added token starts with this byte */
  PreStep steps[8];
  int nsteps;
  Normalization norm;
  int bos, eos, add_bos;
  char *chat_template; /* Jinja text or NULL */
};

/* Shared tables and maps (vocab.c). */
Tokenizer *tok_new(void);
void tok_set_vocab_size(Tokenizer *t, int n);
/* Defines token `id`; later definitions of an id or string replace earlier ones. */
void tok_define(Tokenizer *t, int32_t id, const char *s, size_t len, unsigned flags);
int32_t tok_lookup(const Tokenizer *t, const char *s, size_t len);
/* Adds merge number `rank` of "left right"; silently skipped when either side or the result is unknown. */
void tok_add_merge(Tokenizer *t, const char *left, size_t llen, const char *right, size_t rlen, int32_t rank);
/* After all tokens are defined: byte ids, the sorted added-token list, the chat template's default prompt. */
int tok_finish(Tokenizer *t, Diag *d);
int merge_lookup(const MergeMap *m, int32_t left, int32_t right, int32_t *merged);

/* GPT-2 byte <-> unicode table (bytelevel.c). Encodes byte b's character as UTF-8 into out; returns length. */
int bytelevel_char(unsigned char b, char out[4]);
/* Byte for a code point of the table, or -1 if the code point is not one of its characters. */
int bytelevel_byte(uint32_t cp);

/* Pre-tokenizer steps (pretokenize.c). Patterns are compiled with PCRE2_UTF | PCRE2_UCP. */
extern const char *const TOK_PATTERN_GPT2, *const TOK_PATTERN_LLAMA3, *const TOK_PATTERN_QWEN2,
                                                                          *const TOK_PATTERN_DIGITS;
int pre_add_split(Tokenizer *t, const char *pattern, int literal, SplitBehavior b, int invert, Diag *d);
int pre_add_bytelevel(Tokenizer *t, int use_regex, int add_prefix_space, Diag *d);
void pre_free(Tokenizer *t);
typedef void (*PieceFn)(const Tokenizer *t, const char *s, size_t n, void *ctx);
/* Runs the pre-tokenizer steps over s, calling fn for every final piece in order. */
int pre_tokenize(const Tokenizer *t, const char *s, size_t n, PieceFn fn, void *ctx, Diag *d);

/* BPE over one piece (bpe.c): appends its ids to the growable array *ids (length *n, capacity *cap). */
void bpe_encode_piece(const Tokenizer *t, const char *s, size_t n, int32_t **ids, int *len, int *cap);

/* Loads from the text of a tokenizer.json (and optionally tokenizer_config.json, may be
 * NULL); used by tokenizer_from_hf_dir and by the fuzz target. */
Tokenizer *tokenizer_from_hf_json(const char *json, size_t n, const char *config_json, size_t config_n, Diag *d);
#endif
