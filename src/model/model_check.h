/* A model file's tensors checked against its hyperparameters: the graph its architecture builds from the
 * config says which weights are read and their shapes; every one must be in the file with that shape, and
 * every tensor of the file must be read (or be one the architecture knows it may skip). Metadata that
 * disagrees with the tensors (a wrong block_count, a config.json with fewer layers than the weights) is one
 * error naming the file and the tensor or key, not a model run with the wrong structure. */
#ifndef LATHE_MODEL_CHECK_H
#define LATHE_MODEL_CHECK_H
#include "weights.h"

int model_check_weights(WeightStore *w, const ModelConfig *c, Diag *d);
/* weights_open, then model_check_weights: what loading a model to run or compile uses. */
WeightStore *model_weights_open(const char *path, ModelConfig *c, Diag *d);
#endif
