/* mmap of a whole file. The descriptor is closed before returning: the mapping stays valid without it. */
#include "mapfile.h"
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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
