/* lathe: compile and run tensor programs through the six-stage pipeline. */
#include <stdio.h>
#include <string.h>
#include "cli.h"

#define LATHE_VERSION "0.1.0"

static void usage(FILE *f) {
  fputs("usage: lathe <command> [options]\n"
        "\n"
        "commands:\n"
        "  generate [MODEL] (--prompt TEXT | --prompt-tokens 1,2,3) [--max-tokens N] [--temperature T]\n"
        "      [--top-p P] [--top-k K] [--seed N] [--greedy] [--stop STR] [--chat] [--system TEXT]\n"
        "      [--json] [--ctx N] [--target auto|cuda|cpu (default auto)] [--quiet]\n"
        "      [--weights auto|f32|bf16|f16 (default auto: the file's f16/bf16, else exact f32)]\n"
        "      [--matmul-precision high|highest|medium (CUDA prefill GEMMs; default high: f32 activations\n"
        "       as bf16 hi + lo on tensor cores; medium: rounded to bf16, as PyTorch's bf16; highest: no\n"
        "       tensor cores)]\n"
        "      complete a prompt (streamed); MODEL is a Hugging Face directory, a .gguf file or a\n"
        "      cached model's name (lathe list),\n"
        "      default: the model `make model` installs ($LATHE_MODEL overrides)\n"
        "  chat [MODEL] [--system TEXT] [sampling options as for generate]\n"
        "      interactive multi-turn chat with the model's chat template\n"
        "  bench [MODEL | --config qwen3-0.6b|llama-3.2-1b|qwen3-8b|smollm2-135m --random-weights]\n"
        "      [--target auto|cuda|cpu] [--prompt-len 128] [--gen-len 256] [--prefill-len 512] [--dtype bf16]\n"
        "      [--bandwidth GB/s (default 4130, an H200's copy bandwidth)] [--weights ...]\n"
        "      [--matmul-precision ...] [--fuse-recompute] [--json]\n"
        "      prefill ms, decode tok/s, % of the bandwidth floor, compile times, memory;\n"
        "      MODEL defaults to the default model\n"
        "  compile (-e PROGRAM | FILE.lt | MODEL | --config NAME) [--ir STAGE] [--target cpu|cuda] [-o OUT]\n"
        "      print one stage: graph, tensor, loop, tile, kernel, code (default code)\n"
        "      --fuse-recompute   allow fusions that recompute a reduction (norm -> linear prologue)\n"
        "      --no-fuse          one kernel per reduction (no reduction fusion)\n"
        "      --matmul-precision high|highest|medium   tensor-core GEMMs on CUDA (as for generate)\n"
        "  run (-e PROGRAM | FILE.lt) [--target cpu|cuda|auto] [--dim NAME=N]... [--seed N]\n"
        "      [--check] [--bench] [--iters N] [--warmup N] [--matmul-precision ...]\n"
        "      run on random inputs; --check compares every output with a float64 reference\n"
        "      (exit 1 on mismatch), --bench reports the median time of the compiled program\n"
        "  pull ORG/NAME[:FILE] [--revision REV] [--dir DIR] [--quiet]\n"
        "      download a Hugging Face model (or one GGUF file of it, by name or tag such as :Q4_K_M) into\n"
        "      the model cache, resuming and checking sizes and checksums ($LATHE_HF_ENDPOINT, $HF_TOKEN)\n"
        "  list [--json]      the cached models; each NAME works as MODEL above\n"
        "  help, --help       this text\n"
        "  --version          print the version\n"
        "\n"
        "exit status: 0 ok, 1 --check mismatch, 2 error\n",
        f);
}

int main(int argc, char **argv) {
  install_reporting();
  if (argc < 2) {
    usage(stderr);
    return EXIT_ERROR;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "compile")) return cmd_compile(argc - 1, argv + 1);
  if (!strcmp(cmd, "run")) return cmd_run(argc - 1, argv + 1);
  if (!strcmp(cmd, "generate")) return cmd_generate(argc - 1, argv + 1);
  if (!strcmp(cmd, "chat")) return cmd_chat(argc - 1, argv + 1);
  if (!strcmp(cmd, "bench")) return cmd_bench(argc - 1, argv + 1);
  if (!strcmp(cmd, "pull")) return cmd_pull(argc - 1, argv + 1);
  if (!strcmp(cmd, "list")) return cmd_list(argc - 1, argv + 1);
  if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
    usage(stdout);
    return EXIT_OK;
  }
  if (!strcmp(cmd, "--version")) {
    printf("lathe %s\n", LATHE_VERSION);
    return EXIT_OK;
  }
  report_msg("unknown command '%s' (expected compile or run; see lathe --help)", cmd);
  return EXIT_ERROR;
}
