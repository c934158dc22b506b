/* model.h: the MLP both servers serve, on the CPU: its shape, its weights
 * (generated from a seed, or read from the file the service writes), and the
 * reference forward pass that the CPU backend runs and the tests compare the
 * GPU's results with.
 *
 * Layout. `dims` holds nlayers + 1 sizes: dims[0] inputs, dims[nlayers]
 * outputs. Layer l maps dims[l] to dims[l+1]: y = x W_l + b_l, W_l row-major
 * [dims[l]][dims[l+1]], then ReLU on every layer but the last (identity).
 * A batch is row-major: n rows of dims[0] floats in, n rows of
 * dims[nlayers] floats out.
 *
 * Weights file (little-endian, what x86-64 writes): "CEVMLP01", u32
 * nlayers, u32 dims[nlayers + 1], u64 seed, then per layer W_l and b_l as
 * float32, then u32 CRC-32 (zlib's) of everything before it.
 * tests/mlp_ref.py reads the same format.
 *
 * Thread: a model is read-only once made; any thread may run the forward
 * pass on it. */
#ifndef INFER_MODEL_H
#define INFER_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define MODEL_MAX_LAYERS 3
#define MODEL_MAX_DIM    8192

struct model {
  int nlayers;                    /* 2 or 3 */
  int dims[MODEL_MAX_LAYERS + 1]; /* dims[0] = inputs, dims[nlayers] = outputs */
  uint64_t seed;                  /* what generated the weights (0: unknown) */
  float *w[MODEL_MAX_LAYERS];     /* [dims[l]][dims[l+1]] */
  float *b[MODEL_MAX_LAYERS];     /* [dims[l+1]] */
};

/* Parses "64,256,256,16" into m->nlayers and m->dims (3 or 4 sizes, each
 * 1..MODEL_MAX_DIM). Returns 0, or -1 with a one-line reason in err. */
int model_parse_dims(struct model *m, const char *list, char *err, size_t errlen);

/* Fills the weights deterministically from `seed` (splitmix64; Glorot
 * uniform for W, small uniform for b) for the dims already set. Returns 0,
 * or -1 when out of memory. */
int model_generate(struct model *m, uint64_t seed);

/* Reads a weights file. When m->nlayers is set, the file's dims must equal
 * them. Returns 0; -1 with a reason in err (missing file: errno ENOENT is
 * left set so the caller can decide to generate it). */
int model_load(struct model *m, const char *path, char *err, size_t errlen);

/* Writes the weights file (to path.tmp, then renamed). Returns 0 or -1 with
 * a reason. */
int model_save(const struct model *m, const char *path, char *err, size_t errlen);

/* The reference forward pass of n rows: accumulates in double, rounds each
 * layer's output to float as the GPU stores it. `scratch` holds at least
 * 2 * model_max_width(m) doubles. */
void model_forward(const struct model *m, const float *in, float *out, int n, double *scratch);

/* The widest layer (the largest of dims). */
int model_max_width(const struct model *m);

/* Parameter count (weights and biases), for the log. */
size_t model_params(const struct model *m);

void model_free(struct model *m);

/* zlib's CRC-32 (exposed for the unit test). */
uint32_t model_crc32(uint32_t crc, const void *data, size_t len);

#endif
