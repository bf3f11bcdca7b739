#include "lexer.h"
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Lexer {
  const char *p;
  int line, col;
  int depth; /* open ( and [ : newlines inside them are whitespace */
  Arena *arena;
  Token *toks;
  int n, cap;
} Lexer;

static Token *push(Lexer *lx, TokKind k, int line, int col) {
  if (lx->n == lx->cap) {
    int cap = lx->cap ? lx->cap * 2 : 256;
    Token *t = ARENA_ARRAY(lx->arena, Token, cap);
    if (lx->n) memcpy(t, lx->toks, sizeof(Token) * (size_t)lx->n);
    lx->toks = t;
    lx->cap = cap;
  }
  Token *t = &lx->toks[lx->n++];
  memset(t, 0, sizeof *t);
  t->kind = k;
  t->line = line;
  t->col = col;
  return t;
}

static void advance(Lexer *lx, size_t n) {
  lx->p += n;
  lx->col += (int)n;
}

static int is_ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* Scans a number at lx->p; returns 0 with diag set on a malformed one. */
static int lex_number(Lexer *lx, Diag *d) {
  const char *s = lx->p, *q = s;
  int is_float = 0;
  while (isdigit((unsigned char)*q)) q++;
  if (*q == '.') {
    is_float = 1;
    q++;
    while (isdigit((unsigned char)*q)) q++;
  }
  if (*q == 'e' || *q == 'E') {
    const char *e = q + 1;
    if (*e == '+' || *e == '-') e++;
    if (!isdigit((unsigned char)*e)) {
      while (is_ident_char(*q)) q++;
      diag_error(d, lx->line, lx->col, "malformed number '%.*s' (expected digits after the exponent)", (int)(q - s), s);
      return 0;
    }
    while (isdigit((unsigned char)*e)) e++;
    q = e;
    is_float = 1;
  }
  if (is_ident_char(*q) || *q == '.') {
    const char *r = q;
    while (is_ident_char(*r) || *r == '.') r++;
    diag_error(d, lx->line, lx->col, "malformed number '%.*s'", (int)(r - s), s);
    return 0;
  }
  Token *t = push(lx, is_float ? TK_FLOAT : TK_INT, lx->line, lx->col);
  t->text = arena_strndup(lx->arena, s, (size_t)(q - s));
  errno = 0;
  if (is_float) {
    t->fval = strtod(t->text, NULL);
    if (!isfinite(t->fval)) {
      diag_error(d, lx->line, lx->col, "number '%s' is out of range", t->text);
      return 0;
    }
  } else {
    t->ival = strtoll(t->text, NULL, 10);
    if (errno == ERANGE && !strcmp(t->text, "9223372036854775808")) {
      t->ival = INT64_MIN; /* 2^63: the parser accepts it only after a unary minus */
      t->int64_min = 1;
    } else if (errno == ERANGE) {
      diag_error(d, lx->line, lx->col, "integer literal '%s' is too large", t->text);
      return 0;
    }
    t->fval = (double)t->ival;
  }
  advance(lx, (size_t)(q - s));
  return 1;
}

Token *lex(const char *src, Arena *arena, int *ntok, Diag *d) {
  Lexer lx = {src ? src : "", 1, 1, 0, arena, NULL, 0, 0};
  for (;;) {
    char c = *lx.p;
    if (c == '\0') break;
    if (c == ' ' || c == '\t' || c == '\r') {
      advance(&lx, 1);
    } else if (c == '#') {
      while (*lx.p && *lx.p != '\n') advance(&lx, 1);
    } else if (c == '\n' || c == ';') {
      if (lx.depth == 0 || c == ';') push(&lx, TK_NEWLINE, lx.line, lx.col)->punct = c;
      if (c == '\n') {
        lx.p++;
        lx.line++;
        lx.col = 1;
      } else {
        advance(&lx, 1);
      }
    } else if (isalpha((unsigned char)c) || c == '_') {
      const char *s = lx.p;
      while (is_ident_char(*lx.p)) lx.p++;
      Token *t = push(&lx, TK_IDENT, lx.line, lx.col);
      t->text = arena_strndup(arena, s, (size_t)(lx.p - s));
      lx.col += (int)(lx.p - s);
    } else if (isdigit((unsigned char)c) || (c == '.' && isdigit((unsigned char)lx.p[1]))) {
      if (!lex_number(&lx, d)) return NULL;
    } else if (strchr(":,=+-*/()[]", c)) {
      push(&lx, TK_PUNCT, lx.line, lx.col)->punct = c;
      if (c == '(' || c == '[') lx.depth++;
      if ((c == ')' || c == ']') && lx.depth > 0) lx.depth--;
      advance(&lx, 1);
    } else {
      if (isprint((unsigned char)c)) diag_error(d, lx.line, lx.col, "unexpected character '%c'", c);
      else diag_error(d, lx.line, lx.col, "unexpected character (byte 0x%02x)", (unsigned char)c);
      return NULL;
    }
  }
  push(&lx, TK_EOF, lx.line, lx.col);
  *ntok = lx.n;
  return lx.toks;
}

const char *token_desc(const Token *t, Arena *arena) {
  switch (t->kind) {
  case TK_EOF: return "end of input";
  case TK_NEWLINE: return t->punct == ';' ? "';'" : "end of line";
  case TK_PUNCT: return arena_printf(arena, "'%c'", t->punct);
  default: return arena_printf(arena, "'%s'", t->text);
  }
}
