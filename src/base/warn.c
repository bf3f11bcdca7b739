#include "warn.h"
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

static WarnSink sink;
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER; /* one warning at a time, whole lines */

void warn_set_sink(WarnSink s) { sink = s; }

void warn(const char *fmt, ...) {
  if (!sink) return;
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&sink_lock);
  sink(msg);
  pthread_mutex_unlock(&sink_lock);
}
