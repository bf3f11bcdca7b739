/* Safetensors reader (one file): 8-byte little-endian header length, a JSON header mapping tensor
 * names to {dtype, shape, data_offsets}, then the data. The file is memory-mapped; every offset, size
 * and shape is validated at open. Only F32, F16 and BF16 tensors are accepted. */
#ifndef LATHE_SAFETENSORS_H
#define LATHE_SAFETENSORS_H
#include <stddef.h>
#include <stdint.h>
#include "../base/diag.h"
#include "../ir/dtype.h"

#define ST_MAX_RANK 4

typedef struct StTensor {
  const char *name;
  DType dtype;
  int rank;
  int64_t shape[ST_MAX_RANK]; /* PyTorch order */
  const void *data;           /* into the mapping */
  size_t nbytes;
} StTensor;

typedef struct StFile StFile;

StFile *st_open(const char *path, Diag *d);
/* Parses an image already in memory (tests, fuzzing); the bytes must outlive the file. */
StFile *st_open_memory(const void *data, size_t size, const char *name, Diag *d);
void st_close(StFile *f);
int st_tensor_count(const StFile *f);
const StTensor *st_tensor_at(const StFile *f, int i);
const StTensor *st_find_tensor(const StFile *f, const char *name); /* NULL if absent */
#endif
