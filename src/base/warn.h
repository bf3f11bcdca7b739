/* Warnings: something went wrong that the library worked around (a damaged cache entry rebuilt, a cache
 * directory that cannot be written replaced by a temporary one). Library code never prints; the CLI installs
 * a sink that prints "warning: MSG" on stderr. Without a sink warnings are dropped. */
#ifndef LATHE_WARN_H
#define LATHE_WARN_H

typedef void (*WarnSink)(const char *msg);
void warn_set_sink(WarnSink s);
void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#endif
