/* mmap of a whole file. The descriptor is closed before returning: the mapping stays valid without it. */
#include "mapfile.h"
#include "mem.h"
#include <errno.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "arena.h"

int mapfile_open(const char *path, MappedFile *m, Diag *d) {
  *m = (MappedFile){0};
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    diag_error(d, 0, 0, "%s: cannot open: %s", path, strerror(errno));
    return 0;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    diag_error(d, 0, 0, "%s: not a regular file", path);
    close(fd);
    return 0;
  }
  size_t size = (size_t)st.st_size;
  if (size > 0) {
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      diag_error(d, 0, 0, "%s: cannot map the file: %s", path, strerror(errno));
      close(fd);
      return 0;
    }
    m->data = p;
    m->mapped = 1;
  }
  m->size = size;
  close(fd);
  return 1;
}

void mapfile_close(MappedFile *m) {
  if (m->mapped) munmap((void *)m->data, m->size);
  *m = (MappedFile){0};
}

/* Takes ownership of bytes (unmapped here on failure). */
static void *open_image(MappedFile bytes, const char *name, size_t reader_size, FileImageParse parse, Diag *d) {
  FileImage *im = reader_size >= sizeof *im ? mem_calloc(d, 1, reader_size, "a file reader") : NULL;
  if (!im) {
    mapfile_close(&bytes);
    diag_error(d, 0, 0, "internal error: a file reader smaller than FileImage");
    return NULL;
  }
  im->arena = arena_new();
  im->name = arena_strdup(im->arena, name ? name : "<memory>");
  im->map = bytes;
  im->base = bytes.data;
  im->size = bytes.size;
  if (!parse(im, d)) {
    file_image_close(im);
    return NULL;
  }
  return im;
}

void *file_image_open(const char *path, size_t reader_size, FileImageParse parse, Diag *d) {
  MappedFile map;
  if (!mapfile_open(path, &map, d)) return NULL;
  return open_image(map, path, reader_size, parse, d);
}

void *file_image_open_memory(const void *data, size_t size, const char *name, size_t reader_size, FileImageParse parse,
                             Diag *d) {
  return open_image((MappedFile){data, data ? size : 0, 0}, name, reader_size, parse, d);
}

void file_image_close(void *reader) {
  FileImage *im = reader;
  if (!im) return;
  mapfile_close(&im->map);
  arena_free(im->arena);
  free(im);
}
