/* Settings: every environment variable lathe reads, declared once (settings.c) with its type, default and
 * one line of documentation. Library code reads them only through this table; `lathe env` and
 * `lathe --help` print it. A value is the process-local override (settings_set) when there is one, else
 * the environment's, read again on every call so that a changed environment (tests) is honoured. */
#ifndef LATHE_SETTINGS_H
#define LATHE_SETTINGS_H
#include <stddef.h>

typedef enum SettingId {
  SET_MODEL,          /* LATHE_MODEL */
  SET_CACHE_DIR,      /* LATHE_CACHE_DIR */
  SET_CC,             /* LATHE_CC */
  SET_CPU_BANDWIDTH,  /* LATHE_CPU_BANDWIDTH */
  SET_PROFILE,        /* LATHE_PROFILE */
  SET_CUDA_DEVICE,    /* LATHE_CUDA_DEVICE */
  SET_CUDA_GRAPHS,    /* LATHE_CUDA_GRAPHS */
  SET_BATCH_GRAPHS,   /* LATHE_BATCH_GRAPHS */
  SET_GRAPH_GEMM,     /* LATHE_GRAPH_GEMM */
  SET_PDL,            /* LATHE_PDL */
  SET_CUBLASLT,       /* LATHE_CUBLASLT */
  SET_CUBLASLT_TUNE,  /* LATHE_CUBLASLT_TUNE */
  SET_FLASH_DECODE,   /* LATHE_FLASH_DECODE */
  SET_DECODE_FILL,    /* LATHE_DECODE_FILL */
  SET_DECODE_VEC,     /* LATHE_DECODE_VEC */
  SET_DECODE_TILES,   /* LATHE_DECODE_TILES */
  SET_ROWS_IN_L2,     /* LATHE_ROWS_IN_L2 */
  SET_STORE_VEC,      /* LATHE_STORE_VEC */
  SET_QUANT_UNROLL,   /* LATHE_QUANT_UNROLL */
  SET_QUANT_DOT,      /* LATHE_QUANT_DOT */
  SET_GEMV_ROWS,      /* LATHE_GEMV_ROWS */
  SET_QUANT_GEMV,     /* LATHE_QUANT_GEMV */
  SET_QGEMV_PREFETCH, /* LATHE_QGEMV_PREFETCH */
  SET_FUSE_PROJ,      /* LATHE_FUSE_PROJECTIONS */
  SET_CPU_INT_DOT,    /* LATHE_CPU_INT_DOT */
  SET_CPU_INT_TILE,   /* LATHE_CPU_INT_TILE */
  SET_CPU_HALF_DOT,   /* LATHE_CPU_HALF_DOT */
  SET_NVRTC_UNITS,    /* LATHE_NVRTC_UNITS */
  SET_HF_ENDPOINT,    /* LATHE_HF_ENDPOINT */
  SET_HF_TOKEN,       /* HF_TOKEN */
  SET_CUDA_HOME,      /* CUDA_HOME */
  SET_XDG_CACHE_HOME, /* XDG_CACHE_HOME */
  SET_HOME,           /* HOME */
  SET_COUNT
} SettingId;

typedef enum SettingType {
  SETTING_STRING,
  SETTING_PATH,
  SETTING_BOOL,
  SETTING_INT,
  SETTING_NUMBER,
  SETTING_CHOICE,
} SettingType;

typedef struct SettingInfo {
  SettingId id;
  const char *name; /* the environment variable */
  SettingType type;
  const char *def;     /* the default, as text ("" when it has none or is derived, see def_doc) */
  const char *def_doc; /* how the default is found, for the listing (NULL: def itself) */
  const char *doc;     /* one line */
  int secret;          /* the value is never printed (a token) */
} SettingInfo;

const SettingInfo *setting_info(SettingId id);
/* The entry named `name` (e.g. "LATHE_CC"), or NULL. */
const SettingInfo *setting_find(const char *name);
const char *setting_type_name(SettingType t);

/* The value: the override, else the environment; NULL when neither is set or the value is empty. */
const char *setting_str(SettingId id);
/* A boolean: "0", "false", "no" and "off" are false, any other set value true; def when unset. */
int setting_bool(SettingId id, int def);
/* An integer (or number) setting; *ok (may be NULL) is 0 when the value is set but not a number, and then
 * def is returned. */
long setting_int(SettingId id, long def, int *ok);
double setting_number(SettingId id, double def, int *ok);
/* Replaces the value for this process (NULL: back to the environment's). The CLI's channel into the
 * library in place of setenv. */
void setting_set(SettingId id, const char *value);
/* "env" when the value comes from the environment, "set" for an override, "default" when unset. */
const char *setting_source(SettingId id);

/* The cache directory lathe uses: $LATHE_CACHE_DIR, else $XDG_CACHE_HOME/lathe, else ~/.cache/lathe,
 * without a trailing slash; 0 when none can be formed. */
int settings_cache_root(char *out, size_t n);
#endif
