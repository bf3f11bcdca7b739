#include "notice.h"
#include <stdarg.h>
#include <stdio.h>

static NoticeSink g_sink;
static void *g_ctx;

void notice_set_sink(NoticeSink sink, void *ctx) {
  g_sink = sink;
  g_ctx = ctx;
}

void notice(NoticeKind kind, const char *fmt, ...) {
  if (!g_sink) return;
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  Notice n = {kind, text, 0, 0};
  g_sink(g_ctx, &n);
}

void notice_progress(const char *what, int done, int total) {
  if (!g_sink) return;
  Notice n = {NOTICE_PROGRESS, what, done, total};
  g_sink(g_ctx, &n);
}
