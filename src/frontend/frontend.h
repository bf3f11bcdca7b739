/* Frontend: the text program language (`lathe compile -e`, .lt files) -> graph stage. */
#ifndef LATHE_FRONTEND_H
#define LATHE_FRONTEND_H
#include "../base/arena.h"
#include "../base/diag.h"
#include "../graph/graph.h"
#include "../ir/expr.h"

/* Parses a program. Returns NULL with diag set (line, col, message) on any error. */
Graph *parse_program(const char *src, Arena *arena, ExprPool *pool, Diag *d);
#endif
