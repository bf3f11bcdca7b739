#include "stop_text.h"
#include <string.h>

long stop_find(const char *text, size_t len, const char *const *stop, int nstop) {
  long best = -1;
  for (int k = 0; k < nstop; k++) {
    size_t n = strlen(stop[k]);
    if (!n || n > len) continue;
    for (size_t i = 0; i + n <= len && (best < 0 || (long)i < best); i++)
      if (!memcmp(text + i, stop[k], n)) {
        best = (long)i;
        break;
      }
  }
  return best;
}

size_t stop_safe_len(const char *text, size_t len, const char *const *stop, int nstop) {
  size_t hold = 0;
  for (int k = 0; k < nstop; k++) {
    size_t n = strlen(stop[k]);
    /* the longest tail of the text, shorter than the stop string, that begins it */
    for (size_t t = n - (n > 0); t > hold; t--)
      if (t <= len && !memcmp(text + len - t, stop[k], t)) {
        hold = t;
        break;
      }
  }
  return len - hold;
}
