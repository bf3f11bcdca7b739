/* Lexer of the program language: the whole source becomes one token array up front, so the parser
 * can look ahead freely. Newlines are tokens (statement separators) except inside ( ) and [ ]. */
#ifndef LATHE_LEXER_H
#define LATHE_LEXER_H
#include <stdint.h>
#include "../base/arena.h"
#include "../base/diag.h"

typedef enum TokKind {
  TK_EOF,
  TK_NEWLINE, /* also ';' */
  TK_IDENT,
  TK_INT,
  TK_FLOAT,
  TK_PUNCT /* one of : , = + - * / ( ) [ ] */
} TokKind;

typedef struct Token {
  TokKind kind;
  char punct;       /* TK_PUNCT: the character; TK_NEWLINE: '\n' or ';' */
  const char *text; /* TK_IDENT / numbers: NUL-terminated copy in the arena */
  int64_t ival;     /* TK_INT */
  int int64_min;    /* TK_INT: the literal is 9223372036854775808, valid only negated (ival = INT64_MIN) */
  double fval;      /* TK_INT and TK_FLOAT */
  int line, col;    /* 1-based */
} Token;

/* Returns the tokens (ending with TK_EOF) and their count, or NULL with diag set. */
Token *lex(const char *src, Arena *arena, int *ntok, Diag *d);
const char *token_desc(const Token *t, Arena *arena); /* "')'", "'foo'", "end of line", "end of input" */
#endif
