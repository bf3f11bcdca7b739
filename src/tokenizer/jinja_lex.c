/* Jinja lexer: template text into text tokens and the tokens inside {{ }} and {% %}, comments dropped.
 * Whitespace control as Jinja2 with transformers' settings: `{%-` / `-%}` strip all whitespace before /
 * after a tag; trim_blocks removes the newline right after a block tag or comment; lstrip_blocks removes
 * spaces and tabs between the start of a line and a block tag or comment (`{%+` keeps them, `+%}` keeps
 * the newline). Newlines are normalized to \n and one trailing newline of the template is dropped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "jinja.h"

typedef struct Lex {
  JCtx *c;
  const char *s;
  size_t n, pos;
  JToken *v;
  int nv, cap;
} Lex;

static void pos_of(const Lex *L, size_t off, int *line, int *col) {
  int ln = 1, cl = 1;
  for (size_t i = 0; i < off && i < L->n; i++) {
    if (L->s[i] == '\n') ln++, cl = 1;
    else if (((unsigned char)L->s[i] & 0xC0) != 0x80) cl++;
  }
  *line = ln, *col = cl;
}

static JToken *push(Lex *L, JTok t, size_t at) {
  if (L->nv == L->cap) {
    int cap = L->cap ? 2 * L->cap : 256;
    JToken *v = jalloc(L->c, sizeof *v * (size_t)cap);
    if (L->nv) memcpy(v, L->v, sizeof *v * (size_t)L->nv);
    L->v = v, L->cap = cap;
  }
  JToken *k = &L->v[L->nv++];
  memset(k, 0, sizeof *k);
  k->t = t;
  pos_of(L, at, &k->line, &k->col);
  return k;
}

static _Noreturn void lex_fail(Lex *L, size_t at, const char *what) {
  int line, col;
  pos_of(L, at, &line, &col);
  jfail(L->c, line, col, "%s", what);
}

static int is_space(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v'; }

static void put_utf8(char *out, size_t *n, uint32_t cp) {
  if (cp < 0x80) out[(*n)++] = (char)cp;
  else if (cp < 0x800) out[(*n)++] = (char)(0xC0 | cp >> 6), out[(*n)++] = (char)(0x80 | (cp & 63));
  else if (cp < 0x10000)
    out[(*n)++] = (char)(0xE0 | cp >> 12), out[(*n)++] = (char)(0x80 | (cp >> 6 & 63)),
    out[(*n)++] = (char)(0x80 | (cp & 63));
  else
    out[(*n)++] = (char)(0xF0 | cp >> 18), out[(*n)++] = (char)(0x80 | (cp >> 12 & 63)),
    out[(*n)++] = (char)(0x80 | (cp >> 6 & 63)), out[(*n)++] = (char)(0x80 | (cp & 63));
}

static int hexval(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

/* A string literal with Python's escapes (\n \t \\ \' \" \xhh \uhhhh ...; unknown ones kept as written). */
static void lex_string(Lex *L, JToken *k) {
  size_t start = L->pos;
  char q = L->s[L->pos++];
  size_t end = L->pos;
  while (end < L->n && L->s[end] != q) end += L->s[end] == '\\' && end + 1 < L->n ? 2 : 1;
  if (end >= L->n) lex_fail(L, start, "unterminated string literal");
  char *out = jalloc(L->c, end - L->pos + 1);
  size_t n = 0;
  for (size_t i = L->pos; i < end; i++) {
    char ch = L->s[i];
    if (ch != '\\') {
      out[n++] = ch;
      continue;
    }
    char e = L->s[++i];
    int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (digits) {
      uint32_t cp = 0;
      int ok = i + (size_t)digits < end;
      for (int j = 1; ok && j <= digits; j++) {
        int h = hexval(L->s[i + (size_t)j]);
        if (h < 0) ok = 0;
        else cp = cp * 16 + (uint32_t)h;
      }
      if (!ok || cp > 0x10FFFF) lex_fail(L, i - 1, "malformed \\x / \\u escape in a string literal");
      put_utf8(out, &n, cp);
      i += (size_t)digits;
      continue;
    }
    switch (e) {
    case 'n': out[n++] = '\n'; break;
    case 't': out[n++] = '\t'; break;
    case 'r': out[n++] = '\r'; break;
    case 'a': out[n++] = '\a'; break;
    case 'b': out[n++] = '\b'; break;
    case 'f': out[n++] = '\f'; break;
    case 'v': out[n++] = '\v'; break;
    case '\\': out[n++] = '\\'; break;
    case '\'': out[n++] = '\''; break;
    case '"': out[n++] = '"'; break;
    case '\n': break; /* a backslash-newline continues the line */
    default:
      if (e >= '0' && e <= '7') {
        uint32_t cp = 0;
        for (int j = 0; j < 3 && i < end && L->s[i] >= '0' && L->s[i] <= '7'; j++, i++)
          cp = cp * 8 + (uint32_t)(L->s[i] - '0');
        i--;
        put_utf8(out, &n, cp);
      } else {
        out[n++] = '\\', out[n++] = e;
      }
    }
  }
  out[n] = 0;
  k->s = out, k->n = n;
  L->pos = end + 1;
}

static const char *const OPS[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "/", "*", "%", "~", "(", ")",
                                  "[",  "]",  "{",  "}",  ",",  ".",  ":", "|", "=", "<", ">", ";", NULL};

/* Tokens inside a tag up to its end ("}}" or "%}"), skipping ends inside brackets. Returns the offset just past
 * the end and whether it was "-" (strip what follows) or "+". */
static size_t lex_tag(Lex *L, int block, size_t tag_start, int *strip_after, int *keep_after) {
  int depth = 0;
  char close = block ? '%' : '}';
  for (;;) {
    while (L->pos < L->n && is_space(L->s[L->pos])) L->pos++;
    if (L->pos >= L->n) lex_fail(L, tag_start, block ? "unclosed {% tag" : "unclosed {{ tag");
    const char *p = L->s + L->pos;
    size_t at = L->pos;
    if (depth == 0) {
      int mod = (p[0] == '-' || p[0] == '+') && p[1] == close && p[2] == '}';
      if (mod || (p[0] == close && p[1] == '}')) {
        *strip_after = p[0] == '-';
        *keep_after = p[0] == '+';
        push(L, block ? JT_BLOCK_END : JT_VAR_END, at);
        return at + (size_t)(mod ? 3 : 2);
      }
    }
    if (p[0] == '_' || ((p[0] | 32) >= 'a' && (p[0] | 32) <= 'z')) {
      size_t e = L->pos;
      while (e < L->n &&
             (L->s[e] == '_' || ((L->s[e] | 32) >= 'a' && (L->s[e] | 32) <= 'z') || (L->s[e] >= '0' && L->s[e] <= '9')))
        e++;
      JToken *k = push(L, JT_NAME, at);
      char *name = jalloc(L->c, e - at + 1);
      memcpy(name, p, e - at);
      k->s = name, k->n = e - at;
      L->pos = e;
    } else if (p[0] >= '0' && p[0] <= '9') {
      size_t e = L->pos;
      char digits[64];
      size_t nd = 0;
      int is_float = 0;
      while (e < L->n && ((L->s[e] >= '0' && L->s[e] <= '9') || L->s[e] == '_' ||
                          (L->s[e] == '.' && !is_float && e + 1 < L->n && L->s[e + 1] >= '0' && L->s[e + 1] <= '9' &&
                           !(at > 0 && L->s[at - 1] == '.')) ||
                          ((L->s[e] | 32) == 'e' && e + 1 < L->n &&
                           ((L->s[e + 1] >= '0' && L->s[e + 1] <= '9') || L->s[e + 1] == '-' || L->s[e + 1] == '+')))) {
        if (L->s[e] == '.' || (L->s[e] | 32) == 'e') is_float = 1;
        if ((L->s[e] | 32) == 'e' && (L->s[e + 1] == '-' || L->s[e + 1] == '+')) {
          if (nd + 2 < sizeof digits) digits[nd++] = L->s[e], digits[nd++] = L->s[e + 1];
          e += 2;
          continue;
        }
        if (L->s[e] != '_' && nd + 1 < sizeof digits) digits[nd++] = L->s[e];
        e++;
      }
      digits[nd] = 0;
      JToken *k = push(L, is_float ? JT_FLOAT : JT_INT, at);
      if (is_float) {
        k->f = strtod(digits, NULL);
      } else {
        char *endp;
        unsigned long long v = strtoull(digits, &endp, 10);
        if (nd > 18 && v > (unsigned long long)INT64_MAX) lex_fail(L, at, "integer literal too large");
        k->i = (int64_t)v;
      }
      L->pos = e;
    } else if (p[0] == '\'' || p[0] == '"') {
      lex_string(L, push(L, JT_STRING, at));
    } else {
      int i = 0;
      for (; OPS[i]; i++)
        if (strncmp(p, OPS[i], strlen(OPS[i])) == 0) break;
      if (!OPS[i]) {
        char msg[64];
        snprintf(msg, sizeof msg, "unexpected character '%c'", p[0]);
        lex_fail(L, at, msg);
      }
      JToken *k = push(L, JT_OP, at);
      k->s = OPS[i], k->n = strlen(OPS[i]);
      if (strchr("([{", p[0]) && !OPS[i][1]) depth++;
      if (strchr(")]}", p[0]) && !OPS[i][1] && depth > 0) depth--;
      L->pos += k->n;
    }
  }
}

/* The template text with \r\n and \r as \n and one trailing newline dropped (Jinja2's defaults). */
static char *normalize(JCtx *c, const char *src, size_t *n) {
  size_t len = strlen(src), w = 0;
  char *out = jalloc(c, len + 1);
  for (size_t i = 0; i < len; i++) {
    if (src[i] == '\r') {
      out[w++] = '\n';
      if (src[i + 1] == '\n') i++;
    } else {
      out[w++] = src[i];
    }
  }
  if (w && out[w - 1] == '\n') w--;
  out[w] = 0;
  *n = w;
  return out;
}

JToken *jinja_lex(JCtx *c, const char *src, int *ntok) {
  Lex L = {c, NULL, 0, 0, NULL, 0, 0};
  L.s = normalize(c, src, &L.n);
  c->src = L.s;
  int strip_next = 0, line_starting = 1;
  while (L.pos < L.n) {
    const char *open = L.s + L.pos;
    while ((open = strchr(open, '{')) && open[1] != '{' && open[1] != '%' && open[1] != '#') open++;
    size_t text_start = L.pos, text_end = open ? (size_t)(open - L.s) : L.n;
    if (strip_next)
      while (text_start < text_end && is_space(L.s[text_start])) text_start++;
    strip_next = 0;
    char kind = open ? open[1] : 0, mod = open ? open[2] : 0;
    if (open && mod == '-') {
      while (text_end > text_start && is_space(L.s[text_end - 1])) text_end--;
    } else if (open && kind != '{' && mod != '+') { /* lstrip_blocks: only blanks since the line's start */
      size_t nl = text_end;
      while (nl > text_start && L.s[nl - 1] != '\n') nl--;
      if (nl > text_start || line_starting) {
        size_t k = nl;
        while (k < text_end && (L.s[k] == ' ' || L.s[k] == '\t' || L.s[k] == '\f' || L.s[k] == '\v')) k++;
        if (k == text_end) text_end = nl;
      }
    }
    if (text_end > text_start) {
      JToken *k = push(&L, JT_TEXT, text_start);
      k->s = L.s + text_start, k->n = text_end - text_start;
    }
    if (!open) break;
    size_t tag = (size_t)(open - L.s);
    L.pos = tag + 2 + (mod == '-' || mod == '+');
    int strip_after = 0, keep_after = 0;
    if (kind == '#') {
      const char *end = strstr(L.s + L.pos, "#}");
      if (!end) lex_fail(&L, tag, "unclosed comment");
      strip_after = end > L.s + L.pos && end[-1] == '-';
      keep_after = end > L.s + L.pos && end[-1] == '+';
      L.pos = (size_t)(end - L.s) + 2;
    } else {
      push(&L, kind == '%' ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, tag);
      L.pos = lex_tag(&L, kind == '%', tag, &strip_after, &keep_after);
    }
    if (strip_after) strip_next = 1;
    else if (kind != '{' && !keep_after && L.pos < L.n && L.s[L.pos] == '\n') L.pos++; /* trim_blocks */
    line_starting = L.pos > 0 && L.s[L.pos - 1] == '\n';
  }
  push(&L, JT_EOF, L.n);
  *ntok = L.nv;
  return L.v;
}
