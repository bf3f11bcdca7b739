/* `lathe quantize IN OUT --type TYPE`: rewrite a model (Hugging Face directory or GGUF) as a GGUF v3
 * file of ggml block types (src/model/quantize_model.c). */
#include <stdlib.h>
#include <string.h>
#include "../base/notice.h"
#include "../model/gguf.h"
#include "../model/quantize.h"
#include "cli.h"
#include "options.h"

int cmd_quantize(int argc, char **argv) {
  const char *in = NULL, *out = NULL, *type = NULL;
  int quiet = 0;
  Opt opts[] = {
      {"--type", "-t", OPT_STR, "TYPE",
       "q8_0, q4_0, q4_1, q4_k_m, q5_k_m, q6_k, f16, bf16 or f32 (as llama-quantize's)", &type, .def = ""},
      {"--quiet", "-q", OPT_FLAG, NULL, "no progress or summary on stderr", &quiet},
  };
  CmdSpec cs = {"quantize",
                "IN OUT --type TYPE [options]",
                "Write the model IN (a Hugging Face directory of f32/f16/bf16 safetensors, or a GGUF of any type\n"
                "lathe reads, dequantized first) to OUT as a GGUF v3 file: 1-D tensors f32, matrices in TYPE's\n"
                "mixture (q4_k_m / q5_k_m: q6_k for the LM head and some attn_v / ffn_down; a row length the block\n"
                "does not divide falls back to q5_0 / q5_1 / q8_0, else f16; f16 / bf16 / f32: every matrix in that\n"
                "type). A GGUF input's metadata and tokenizer are copied; a Hugging Face directory's tokenizer is not\n"
                "converted.",
                opts,
                sizeof opts / sizeof opts[0],
                "IN",
                &in,
                NULL};
  /* The option parser takes one positional: lift OUT (the second) out of argv first. */
  char **args = calloc((size_t)argc + 1, sizeof *args);
  if (!args) return EXIT_ERROR;
  int n = 0, npos = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (i > 0 && (!strcmp(a, "--type") || !strcmp(a, "-t")) && i + 1 < argc) {
      args[n++] = argv[i++];
      args[n++] = argv[i];
      continue;
    }
    if (i > 0 && (a[0] != '-' || !a[1]) && ++npos == 2 && !out) {
      out = a;
      continue;
    }
    args[n++] = argv[i];
  }
  int r = opts_parse(&cs, n, args);
  free(args);
  if (r != OPTS_OK) return r == OPTS_HELP ? EXIT_OK : EXIT_ERROR;
  if (!in || !out) {
    report_msg("quantize needs IN and OUT (see lathe quantize --help)");
    return EXIT_ERROR;
  }
  QuantScheme s;
  if (!type || !*type) {
    report_msg("quantize needs --type (%s)", quant_output_names());
    return EXIT_ERROR;
  }
  if (!quant_output_from_name(type, &s)) {
    report_msg("unknown --type '%s' (%s)", type, quant_output_names());
    return EXIT_ERROR;
  }
  if (!quiet) cli_install_notice_sink();
  in = model_arg_resolve(in);
  Diag d = {0};
  QuantReport rep;
  if (!quantize_model(in, out, s, &rep, &d)) {
    report(&d, NULL);
    return EXIT_ERROR;
  }
  if (!quiet) {
    fprintf(stderr, "lathe: quantize: %s -> %s (%s): %d tensors, %lld parameters, %.1f MB (%.2f bits/weight);", in, out,
            quant_scheme_name(s), rep.n_tensors, (long long)rep.in_params, rep.out_bytes / 1e6,
            rep.in_params ? 8.0 * (double)rep.out_bytes / (double)rep.in_params : 0.0);
    for (int t = 0; t < 32; t++)
      if (rep.n_by_type[t]) fprintf(stderr, " %s %lld", ggml_type_name(t), (long long)rep.n_by_type[t]);
    if (rep.n_fallback) fprintf(stderr, "; %d by row-length fallback", rep.n_fallback);
    fprintf(stderr, "%s\n", rep.tokenizer ? "" : "; no tokenizer written");
  }
  return EXIT_OK;
}
