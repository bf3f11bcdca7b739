/* Notices: what the library has to tell a user outside of errors (a fallback taken, profiles, progress).
 * Library code never prints; it hands each notice to the sink the program installed (the CLI prints them
 * on stderr). Without a sink notices are dropped. */
#ifndef LATHE_NOTICE_H
#define LATHE_NOTICE_H

typedef enum NoticeKind {
  NOTICE_WARNING,      /* a fallback or a doubtful request: text is one line */
  NOTICE_PROFILE,      /* a line of a profile (LATHE_PROFILE) */
  NOTICE_PROGRESS,     /* text names the work, done of total steps finished */
  NOTICE_PROGRESS_END, /* the progress shown last is over (finished or abandoned) */
} NoticeKind;

typedef struct Notice {
  NoticeKind kind;
  const char *text;
  int done, total; /* NOTICE_PROGRESS */
} Notice;

typedef void (*NoticeSink)(void *ctx, const Notice *n);

/* Installs the sink (NULL: drop notices). Not thread-safe: install it before work starts. */
void notice_set_sink(NoticeSink sink, void *ctx);
void notice(NoticeKind kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void notice_progress(const char *what, int done, int total);
#endif
