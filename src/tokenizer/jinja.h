/* A Jinja interpreter for chat templates: the subset of Jinja2 that the templates models ship use, with
 * the environment transformers' apply_chat_template renders them in (trim_blocks, lstrip_blocks, no
 * trailing newline kept, the tojson / raise_exception / strftime_now globals, loop controls).
 * Every value lives in one arena per render; errors unwind with longjmp to the render call, which
 * reports them with the template's line and column. A hostile template meets bounded recursion, steps,
 * memory and output, never a hang or a crash. */
#ifndef LATHE_JINJA_H
#define LATHE_JINJA_H
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include "../base/arena.h"
#include "../base/diag.h"
#include "../base/strbuf.h"

typedef enum JType {
  JV_UNDEF, /* a name or key that is not there: prints "", is false, iterates as empty */
  JV_NONE,
  JV_BOOL,
  JV_INT,
  JV_FLOAT,
  JV_STR,
  JV_LIST, /* lists and tuples */
  JV_DICT,
  JV_NS,     /* namespace(): a dict whose attributes can be set */
  JV_MACRO,  /* a {% macro %} with the frame it was defined in */
  JV_FUNC,   /* a global function (range, namespace, ...), u.i names it */
  JV_METHOD, /* a bound method of a string, list or dict: u.m */
  JV_LOOP,   /* a for loop's `loop`: u.loop, its fields computed on access */
} JType;

typedef struct JList JList;
typedef struct JDict JDict;
typedef struct JMethod JMethod;
typedef struct JMacro JMacro;
typedef struct JLoop {
  struct JList *items;
  size_t i;
} JLoop;

typedef struct JValue {
  JType t;
  size_t n; /* byte length of a string */
  union {
    int64_t i; /* int, bool, function id */
    double f;
    const char *s; /* string bytes (UTF-8, NUL-terminated), or an undefined value's name (may be NULL) */
    JList *l;
    JDict *d;
    JMethod *m;
    JMacro *mac;
    JLoop *loop;
  } u;
} JValue;

struct JList {
  JValue *v;
  size_t n;
  int tuple; /* prints as (a, b); never equal to a list */
};
struct JDict {
  JValue *k, *v;
  size_t n, cap;
};
struct JMethod {
  JValue self;
  const char *name;
};

/* Tokens of the template (jinja_lex.c). Text between tags is one token; comments are dropped. */
typedef enum JTok {
  JT_EOF,
  JT_TEXT,
  JT_VAR_BEGIN,
  JT_VAR_END,
  JT_BLOCK_BEGIN,
  JT_BLOCK_END,
  JT_NAME,
  JT_STRING,
  JT_INT,
  JT_FLOAT,
  JT_OP, /* s holds the operator: "+", "//", "==", "(", ... */
} JTok;

typedef struct JToken {
  JTok t;
  int line, col;
  const char *s; /* text, name, decoded string literal or operator */
  size_t n;
  int64_t i;
  double f;
} JToken;

typedef enum JKind {
  /* statements */
  JN_TEXT,
  JN_OUTPUT,
  JN_IF,
  JN_FOR,
  JN_SET,
  JN_SET_BLOCK,
  JN_MACRO,
  JN_BREAK,
  JN_CONTINUE,
  JN_BODY, /* a body with no meaning of its own ({% generation %}) */
  /* expressions */
  JN_LIT,
  JN_NAME,
  JN_LIST,
  JN_DICT,
  JN_ATTR,
  JN_ITEM,
  JN_SLICE,
  JN_CALL,
  JN_FILTER,
  JN_TEST,
  JN_NOT,
  JN_NEG,
  JN_POS,
  JN_BIN,
  JN_AND,
  JN_OR,
  JN_CMP, /* a chain a < b < c: items are the operands, ops[] the operators */
  JN_COND,
} JKind;

typedef struct JNode JNode;
typedef struct JNodes {
  JNode **v;
  int n;
} JNodes;

struct JNode {
  JKind k;
  int line, col;
  const char *name; /* name, attribute, filter, test or macro name; the operator of JN_BIN */
  const char **ops; /* JN_CMP: an operator per pair */
  int negate;       /* JN_TEST: `is not`; JN_LIST: a tuple */
  JValue lit;
  JNode *a, *b, *c;   /* operands: JN_FOR a=iter b=filter; JN_SET a=target b=value; JN_COND a if b else c */
  JNodes items;       /* list items, call/filter/test arguments, slice parts, dict keys, statement body */
  JNodes vals;        /* dict values; keyword argument values; macro parameter defaults (NULL for none) */
  const char **names; /* keyword argument names; for-loop / set targets; macro parameters */
  int nnames;
  JNodes body, orelse; /* if / for / macro / set-block bodies */
};

typedef struct JinjaLimits {
  int max_depth;     /* nesting of expressions, statements and macro calls */
  long max_steps;    /* statements and expressions evaluated */
  size_t max_output; /* bytes of any rendered text (the result, a macro's, a string) */
  size_t max_memory; /* bytes of values allocated */
} JinjaLimits;

typedef struct JFrame JFrame;
typedef struct JBuf {
  char *p;
  size_t n, cap;
  struct JBuf *next; /* every buffer of a render, freed at its end */
} JBuf;

typedef struct JCtx {
  Arena *arena;
  Diag *d;
  jmp_buf fail;
  JinjaLimits lim;
  long steps;
  int depth;
  size_t mem;
  JBuf *bufs;
  JBuf *out; /* where output goes now (a macro call or set-block captures into its own) */
  JFrame *globals;
  struct tm now; /* strftime_now's time */
  const char *src;
  const JNode *at; /* the node being evaluated: where an error without a position of its own is reported */
} JCtx;

/* Errors: record the message at line:col (0:0 when there is no position) and unwind to the render. */
_Noreturn void jfail(JCtx *c, int line, int col, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void *jalloc(JCtx *c, size_t n);
void jdepth_enter(JCtx *c, int line, int col);

/* Lexing and parsing (jinja_lex.c, jinja_parse.c). */
JToken *jinja_lex(JCtx *c, const char *src, int *ntok);
JNodes jinja_parse(JCtx *c, JToken *toks, int ntok);

/* Values (jinja_value.c). */
JValue jv_undef(const char *name);
JValue jv_none(void);
JValue jv_bool(int b);
JValue jv_int(int64_t i);
JValue jv_float(double f);
JValue jv_str(JCtx *c, const char *s, size_t n); /* copies */
JValue jv_cstr(const char *s);                   /* s must outlive the render */
JValue jv_list(JCtx *c, size_t n);               /* n undefined items, to fill */
JValue jv_dict(JCtx *c, JType t);                /* an empty dict or namespace */
void jv_dict_set(JCtx *c, JDict *d, JValue k, JValue v);
int jv_dict_get(const JDict *d, JValue k, JValue *v); /* 1 if found */
int jv_truthy(JValue v);
int jv_equal(JValue a, JValue b);
int jv_compare(JCtx *c, const JNode *at, JValue a, JValue b); /* <0, 0, >0; an error for unordered types */
const char *jv_type_name(JValue v);
/* str() of a value as Python prints it ("None", "True", "['a', 1]"; undefined prints ""), and repr(). */
void jv_to_str(JCtx *c, JBuf *b, JValue v);
void jv_repr(JCtx *c, JBuf *b, JValue v);
JValue jv_stringify(JCtx *c, JValue v);
/* json.dumps(v, ensure_ascii=False, indent=indent (< 0: none)), as transformers' tojson. */
void jv_to_json(JCtx *c, JBuf *b, JValue v, int indent, int level, const JNode *at);
size_t utf8_count(const char *s, size_t n);             /* code points */
size_t utf8_offset(const char *s, size_t n, size_t cp); /* byte offset of code point cp (n if past the end) */

/* Buffers (jinja_value.c): appends check the output limit. */
JBuf *jbuf_new(JCtx *c);
void jbuf_put(JCtx *c, JBuf *b, const char *s, size_t n);
void jbuf_puts(JCtx *c, JBuf *b, const char *s);
JValue jbuf_value(JCtx *c, JBuf *b); /* the text as a string value */

/* Evaluation (jinja_eval.c) and the built-in filters, tests, methods and functions (jinja_builtins.c). */
typedef struct JArgs {
  JValue *pos;
  int npos;
  const char **kwnames;
  JValue *kw;
  int nkw;
} JArgs;
JValue jeval(JCtx *c, JFrame *f, const JNode *e);
void jexec(JCtx *c, JFrame *f, JNodes body);
JFrame *jframe_new(JCtx *c, JFrame *parent);
void jframe_set(JCtx *c, JFrame *f, const char *name, JValue v);
JValue jcall(JCtx *c, const JNode *at, JValue fn, JArgs *args);
JValue jfilter(JCtx *c, const JNode *at, const char *name, JValue v, JArgs *args);
int jtest(JCtx *c, const JNode *at, const char *name, JValue v, JArgs *args);
JValue jgetattr(JCtx *c, JValue obj, const char *name); /* obj.name: methods first, then keys */
JValue jgetitem(JCtx *c, const JNode *at, JValue obj, JValue key);
JValue jcall_method(JCtx *c, const JNode *at, JMethod *m, JArgs *args);
/* "fmt" % args with %s, %r, %d, %i, %f (precision allowed) and %%; args a tuple or one value. */
JValue jformat_percent(JCtx *c, const JNode *at, JValue fmt, JValue args);
/* The items a for loop visits: a list's items, a dict's keys, a string's characters; undefined: none. */
JList *jiterate(JCtx *c, const JNode *at, JValue v);
enum { JF_RANGE = 1, JF_NAMESPACE, JF_DICT, JF_RAISE, JF_STRFTIME, JF_LOOP_CYCLE };

/* The whole render: parses and runs `src` with `vars` (a dict of the template's variables). */
int jinja_render(const char *src, JValue (*make_vars)(JCtx *c, void *arg), void *arg, const JinjaLimits *lim,
                 const struct tm *now, StrBuf *out, Diag *d);
extern const JinjaLimits JINJA_DEFAULT_LIMITS;

/* chat_template_render with explicit limits (NULL: the defaults) and strftime_now's time (NULL: now). */
struct ChatMessage;
int chat_template_render_with(const char *template_text, const struct ChatMessage *msgs, int n,
                              int add_generation_prompt, const char *bos, const char *eos, const JinjaLimits *lim,
                              const struct tm *now, StrBuf *out, Diag *d);
#endif
