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

/* What a model-file reader parses: the bytes (mapped from a file, or borrowed memory), a name for
 * diagnostics, and an arena for what the parse builds. A reader's own struct starts with one. */
struct Arena;
typedef struct FileImage {
  const char *name;
  const unsigned char *base;
  size_t size;
  MappedFile map; /* zeroed when the bytes are borrowed */
  struct Arena *arena;
} FileImage;

typedef int (*FileImageParse)(void *reader, Diag *d);
/* Allocates a zeroed reader of reader_size bytes (starting with a FileImage) over the file at `path`,
 * or over size bytes at data (borrowed; name is for diagnostics, "<memory>" if NULL), and runs parse
 * on it. NULL, with d set, when the file cannot be mapped, memory runs out or parse fails; nothing is
 * left allocated then. */
void *file_image_open(const char *path, size_t reader_size, FileImageParse parse, Diag *d);
void *file_image_open_memory(const void *data, size_t size, const char *name, size_t reader_size, FileImageParse parse,
                             Diag *d);
/* Frees a reader made by file_image_open*; NULL is ignored. */
void file_image_close(void *reader);
#endif
