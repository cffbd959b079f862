/* tg_llm.h — language models: GPT-2's byte-level BPE tokenizer, GGUF model files (llama.cpp's
 * format) and the GPT-2 model. See docs/llm.md.
 *
 * Errors follow tg.h: a function returns NULL or a negative tg_status and leaves a message in
 * tg_last_error() naming the operation, the file and what is wrong. */
#ifndef TG_LLM_H
#define TG_LLM_H

#include "tg.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------- BPE tokenizer
 * GPT-2's byte-level BPE: text is split by GPT-2's pre-tokenization regex, each piece's UTF-8
 * bytes become byte-level symbols, and merges.txt's pairs are applied lowest rank first
 * (leftmost first among equals), as Hugging Face's `tokenizers` does. Special tokens are not
 * split out of text: "<|endoftext|>" in a text is encoded as ordinary characters (look its id
 * up with tg_bpe_token_id). */

/** A loaded tokenizer (opaque). */
typedef struct tg_bpe tg_bpe;

/** Load vocab_path (JSON: token -> id, ids 0..n-1 each once: vocab.json or encoder.json) and
 *  merges_path (one "left right" pair per line, "#version" first line optional: merges.txt or
 *  vocab.bpe). NULL on error. */
tg_bpe *tg_bpe_load(const char *vocab_path, const char *merges_path);
/** Load dir/vocab.json + dir/merges.txt, else dir/encoder.json + dir/vocab.bpe. NULL on error. */
tg_bpe *tg_bpe_load_dir(const char *dir);
/** Free a tokenizer. NULL is a no-op. */
void tg_bpe_free(tg_bpe *tok);
/** The number of tokens (ids are 0..size-1); -1 for NULL. */
int64_t tg_bpe_vocab_size(const tg_bpe *tok);
/** The id of a token given as its vocabulary string (e.g. "<|endoftext|>", "Ġthe"); -1 if absent. */
int64_t tg_bpe_token_id(const tg_bpe *tok, const char *token);
/** The vocabulary string of id (owned by tok); NULL if out of range. */
const char *tg_bpe_token(const tg_bpe *tok, int64_t id);
/** Encode len bytes of UTF-8 text. Writes the first min(count, cap) ids to ids (may be NULL
 *  when cap is 0) and returns count, the number of ids the text has (call again with a larger
 *  array if it is above cap), or a negative tg_status (text not valid UTF-8). */
int64_t tg_bpe_encode(const tg_bpe *tok, const char *text, size_t len, int32_t *ids, int64_t cap);
/** Decode n ids to bytes (what encode read, for any text). Writes the first min(len, cap)
 *  bytes to out, then a NUL if len < cap; returns len, or a negative tg_status (an id out of
 *  range). */
int64_t tg_bpe_decode(const tg_bpe *tok, const int32_t *ids, int64_t n, char *out, size_t cap);

/* ------------------------------------------------------------------ GGUF
 * GGUF v2 and v3 files (little-endian): metadata key/value pairs and tensors. A tensor's tg
 * shape is its GGUF dims reversed (GGUF lists the innermost first), as numpy's gguf reader
 * does. F32, F16 and BF16 tensors load as tensors of that dtype; Q8_0, Q4_0, Q4_1, Q4_K and
 * Q6_K load as a uint8 tensor of their raw blocks with lazy float32 dequantization ops on it,
 * which fuse into the kernel that consumes them (no dequantized copy is stored). */

/** An open GGUF file (opaque). */
typedef struct tg_gguf tg_gguf;

/** Metadata value types (the numbers are GGUF's). */
typedef enum tg_gguf_type {
  TG_GGUF_UINT8 = 0, TG_GGUF_INT8 = 1, TG_GGUF_UINT16 = 2, TG_GGUF_INT16 = 3, TG_GGUF_UINT32 = 4,
  TG_GGUF_INT32 = 5, TG_GGUF_FLOAT32 = 6, TG_GGUF_BOOL = 7, TG_GGUF_STRING = 8, TG_GGUF_ARRAY = 9,
  TG_GGUF_UINT64 = 10, TG_GGUF_INT64 = 11, TG_GGUF_FLOAT64 = 12
} tg_gguf_type;

/** What tg_gguf_tensor_info tells about a tensor. */
typedef struct tg_gguf_tensor_info {
  const char *name;      /**< owned by the file */
  int ggml_type;         /**< GGML's type number (0 F32, 1 F16, 2 Q4_0, 3 Q4_1, 8 Q8_0, 12 Q4_K, 14 Q6_K, 30 BF16) */
  const char *type_name; /**< "F32", "Q8_0", ... */
  int ndim;              /**< 1..4 */
  int64_t shape[4];      /**< tg order: the outermost first */
  int64_t offset;        /**< of the data, in bytes from the file's start */
  int64_t nbytes;        /**< of the data in the file */
} tg_gguf_tensor_info;

/** Open and validate a GGUF file (header, metadata, tensor table, offsets). NULL on error. */
tg_gguf *tg_gguf_open(const char *path);
/** Close a file. NULL is a no-op. Tensors made from it stay valid (they hold copies). */
void tg_gguf_close(tg_gguf *g);
/** The file's GGUF version (2 or 3); -1 for NULL. */
int tg_gguf_version(const tg_gguf *g);
/** The number of metadata pairs; -1 for NULL. */
int64_t tg_gguf_kv_count(const tg_gguf *g);
/** The key of pair i (owned by g); NULL if out of range. */
const char *tg_gguf_kv_key(const tg_gguf *g, int64_t i);
/** The index of key, or -1 (no error is set: a missing key is a normal answer). */
int64_t tg_gguf_find_key(const tg_gguf *g, const char *key);
/** The type of key's value; for an array, *elem_type and *count (either may be NULL) tell
 *  its elements. A negative tg_status if the key is absent. */
int tg_gguf_kv_type(const tg_gguf *g, const char *key, tg_gguf_type *elem_type, int64_t *count);
/** An integer or bool value as int64 (a uint64 above INT64_MAX is an error). 0 or a negative tg_status. */
int tg_gguf_get_int(const tg_gguf *g, const char *key, int64_t *out);
/** A float32, float64 or integer value as double. 0 or a negative tg_status. */
int tg_gguf_get_float(const tg_gguf *g, const char *key, double *out);
/** A string value (NUL-terminated, owned by g; it may hold NULs: *len is its length, len may
 *  be NULL). NULL on error. */
const char *tg_gguf_get_string(const tg_gguf *g, const char *key, size_t *len);
/** Element i of an integer or bool array, as tg_gguf_get_int. */
int tg_gguf_get_array_int(const tg_gguf *g, const char *key, int64_t i, int64_t *out);
/** Element i of a float or integer array, as tg_gguf_get_float. */
int tg_gguf_get_array_float(const tg_gguf *g, const char *key, int64_t i, double *out);
/** Element i of a string array, as tg_gguf_get_string. */
const char *tg_gguf_get_array_string(const tg_gguf *g, const char *key, int64_t i, size_t *len);
/** The number of tensors; -1 for NULL. */
int64_t tg_gguf_tensor_count(const tg_gguf *g);
/** Fill *info for tensor i (0..count-1). 0 or a negative tg_status. */
int tg_gguf_tensor_info_at(const tg_gguf *g, int64_t i, tg_gguf_tensor_info *info);
/** The index of the tensor called name, or -1 (no error is set). */
int64_t tg_gguf_find_tensor(const tg_gguf *g, const char *name);
/** The tensor called name as a lazy tg tensor (current scope): F32/F16/BF16 in that dtype,
 *  quantized types as float32 (dequantization ops over the raw blocks). NULL on error. */
tg_tensor *tg_gguf_tensor(tg_gguf *g, const char *name);

/** A tokenizer from a GGUF file's metadata: tokenizer.ggml.tokens (id = index) and
 *  tokenizer.ggml.merges ("left right" strings, rank = index); tokenizer.ggml.model, if
 *  present, must be "gpt2". Independent of g once made. NULL on error. */
tg_bpe *tg_bpe_from_gguf(const tg_gguf *g);

/* ----------------------------------------------------------------- GPT-2
 * OpenAI's GPT-2 (src/nn/gpt2.c): learned position embeddings, pre-norm blocks (layernorm,
 * causal multi-head attention, layernorm, GELU MLP), a final layernorm and an output
 * projection tied to the token embedding. Weights are float32 tensors (a GGUF file's
 * quantized weights stay lazy dequantization ops over the raw blocks, fused into the matmuls
 * that read them). Decoding keeps a key/value cache of batch 1 per layer; its position is a
 * kernel argument, so every decode step runs the same compiled kernels. */

/** A model's sizes (config.json's names). */
typedef struct tg_gpt2_config {
  int64_t n_layer, n_head, n_embd;
  int64_t n_inner;     /**< the MLP's width; 0 in tg_gpt2_new: 4 n_embd */
  int64_t vocab_size, n_positions;
  double eps;          /**< layer_norm_epsilon (1e-5) */
  bool gelu_erf;       /**< activation "gelu" (erf form); false: "gelu_new" (tanh form, GPT-2's) */
} tg_gpt2_config;

/** A GPT-2 model (opaque). */
typedef struct tg_gpt2 tg_gpt2;

/** Load a Hugging Face directory: dir/config.json (n_layer, n_head, n_embd, vocab_size,
 *  n_positions required; n_inner, layer_norm_epsilon, activation_function read) and
 *  dir/model.safetensors with GPT-2's names (wte.weight, wpe.weight, h.N.ln_1.weight,
 *  h.N.attn.c_attn.weight as Conv1D (in, out), ..., ln_f.bias), with or without the
 *  "transformer." prefix; float16/bfloat16 weights are cast. NULL on error (a missing file
 *  or tensor, a wrong shape, a bad config: the message names it). */
tg_gpt2 *tg_gpt2_load(const char *dir);
/** Load a GGUF file as llama.cpp's converter writes GPT-2: general.architecture "gpt2",
 *  gpt2.block_count, .context_length, .embedding_length, .feed_forward_length,
 *  .attention.head_count (.attention.layer_norm_epsilon optional); tensors token_embd,
 *  position_embd, blk.N.attn_norm, attn_qkv, attn_output, ffn_norm, ffn_up, ffn_down
 *  (weights (out, in)), output_norm, and output.weight if untied. NULL on error. */
tg_gpt2 *tg_gpt2_load_gguf(const char *path);
/** A new model with Hugging Face's initialization (weights N(0, 0.02), the residual
 *  projections N(0, 0.02/sqrt(2 n_layer)), biases 0, norm weights 1) from the seeded
 *  generator; every tensor requires grad. NULL on error. */
tg_gpt2 *tg_gpt2_new(const tg_gpt2_config *config);
/** Free a model and its cache. NULL is a no-op. */
void tg_gpt2_free(tg_gpt2 *m);
/** The model's sizes (owned by m); NULL for NULL. */
const tg_gpt2_config *tg_gpt2_get_config(const tg_gpt2 *m);
/** The model's tensors (for an optimizer): an array the caller frees, *n entries. */
tg_tensor **tg_gpt2_parameters(tg_gpt2 *m, int *n);
/** Write dir/config.json and dir/model.safetensors (the directory must exist) in the
 *  Hugging Face layout tg_gpt2_load and transformers' GPT2LMHeadModel read. 0 or negative. */
int tg_gpt2_save(tg_gpt2 *m, const char *dir);
/** Logits (B, T, V), lazy, of ids (B, T) (any integer dtype) at positions 0..T-1 with causal
 *  attention and no cache (training, full recompute). Differentiable. NULL on error. */
tg_tensor *tg_gpt2_forward(tg_gpt2 *m, tg_tensor *ids);
/** Empty the key/value cache and size it for max_len positions (0: n_positions; above
 *  n_positions is an error); -1 frees it. Attention reads the cache's whole length every step,
 *  so a max_len near what will be generated is faster. 0 or negative. */
int tg_gpt2_reset(tg_gpt2 *m, int64_t max_len);
/** Run the next n tokens (ids in 0..vocab_size-1) through the model at the cache's position
 *  (a prompt, then one token at a time), append their keys and values, and return their
 *  logits (n, V), realized. The first call without tg_gpt2_reset sizes the cache at
 *  n_positions. NULL on error (past the cache's end; after an error, reset). */
tg_tensor *tg_gpt2_step(tg_gpt2 *m, const int32_t *ids, int64_t n);
/** Run one-token steps through a tg_jit (on) or not (off, the default): the first steps
 *  record the step's kernels, later ones replay them with no graph built, scheduled or
 *  compiled (the position is an input of the recording). A reset drops the recording. */
int tg_gpt2_use_jit(tg_gpt2 *m, bool on);
/** The cache's position (tokens run since the reset); -1 without a cache. */
int64_t tg_gpt2_position(const tg_gpt2 *m);

#ifdef __cplusplus
}
#endif
#endif /* TG_LLM_H */
