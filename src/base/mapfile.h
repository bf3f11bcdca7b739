/* Read-only memory mapping of a whole regular file, shared by the model-file readers. */
#ifndef LATHE_MAPFILE_H
#define LATHE_MAPFILE_H
#include <stddef.h>
#include "diag.h"

typedef struct MappedFile {
  const unsigned char *data; /* NULL for an empty file (mmap rejects length 0) */
  size_t size;
  int mapped; /* 1 when data must be unmapped by mapfile_close */
} MappedFile;

/* Maps `path` read-only. Returns 1 on success; 0 after recording "<path>: cannot open: ...",
 * "<path>: not a regular file" or "<path>: cannot map the file: ..." in d. */
int mapfile_open(const char *path, MappedFile *m, Diag *d);
/* Unmaps and zeroes m; safe on a zeroed or already closed MappedFile. */
void mapfile_close(MappedFile *m);
#endif
