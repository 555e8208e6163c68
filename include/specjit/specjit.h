/* specjit's stable C ABI (C11). The only symbols libspecjit.so exports.
 *
 *   specjit_engine* engine;
 *   specjit_engine_create(NULL, &engine);                // settings from SPECJIT_* variables
 *   specjit_param params[] = {{"num_tokens", "dynamic"}, {"BLOCK", "exact"}};
 *   specjit_kernel_desc desc = {sizeof desc};
 *   desc.id = "scale"; desc.source_name = "scale.cu"; desc.source_text = text;
 *   desc.function = "scale"; desc.params = params; desc.param_count = 2;
 *   specjit_kernel* kernel;
 *   specjit_kernel_define(engine, &desc, &kernel);
 *   int64_t values[] = {num_tokens, 128};
 *   specjit_launch_config launch = {sizeof launch, {blocks, 1, 1}, {128, 1, 1}, 0, stream};
 *   void* args[] = {&x, &num_tokens};  size_t sizes[] = {sizeof x, sizeof num_tokens};
 *   specjit_kernel_launch(kernel, values, 2, &launch, args, sizes, 2);
 *
 * ABI rules (docs/c-api.md):
 * - Every function returns a specjit_status; on failure specjit_last_error() holds a message
 *   for the calling thread until its next failing call. No function aborts or exits, and none
 *   throws: bad handles, NULL pointers, wrong counts or sizes give SPECJIT_ERROR_INVALID_ARGUMENT.
 * - Structs the caller fills begin with `size_t struct_size` (set it to sizeof the struct):
 *   fields are only ever appended, and the library reads only the fields the caller's size
 *   covers, so a program built against an older header keeps working with a newer library.
 * - Handles are opaque. A kernel and its variants live as long as their engine. Strings the
 *   library returns live as long as the handle they came from (or, for specjit_last_error, until
 *   the thread's next failing call).
 * - SPECJIT_ABI_VERSION changes only when an existing declaration changes incompatibly; adding
 *   a function or a trailing struct field does not change it. The shared library's soname
 *   carries it (libspecjit.so.1).
 */
#ifndef SPECJIT_SPECJIT_H
#define SPECJIT_SPECJIT_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define SPECJIT_API
#else
#define SPECJIT_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define SPECJIT_ABI_VERSION 1

typedef enum specjit_status {
  SPECJIT_OK = 0,
  SPECJIT_ERROR_INVALID_ARGUMENT = 1, /* bad handle, NULL, wrong count/size, bad value/policy */
  SPECJIT_ERROR_NOT_FOUND = 2,        /* a source file, header or include directory is missing */
  SPECJIT_ERROR_COMPILE = 3,          /* NVRTC rejected the source; the message holds its log */
  SPECJIT_ERROR_STRICT = 4,           /* sealed under SPECJIT_STRICT=error and not in the cache */
  SPECJIT_ERROR_DRIVER = 5,           /* no CUDA driver, or a driver call failed */
  SPECJIT_ERROR_CAPTURING = 6,        /* a compile or module load was needed while the stream
                                         is capturing a CUDA graph: warm up or precompile */
  SPECJIT_ERROR_CACHE = 7,            /* a cache operation that was asked for failed */
  SPECJIT_ERROR_INTERNAL = 8
} specjit_status;

typedef struct specjit_engine specjit_engine;
typedef struct specjit_kernel specjit_kernel;
typedef struct specjit_variant specjit_variant;
typedef struct specjit_settings specjit_settings;

/* Version and errors. */
SPECJIT_API uint32_t specjit_abi_version(void);
SPECJIT_API const char* specjit_version(void); /* the library's version, e.g. "0.5.0" */
SPECJIT_API const char* specjit_status_name(specjit_status status);
SPECJIT_API const char* specjit_last_error(void); /* "" when the thread's last call succeeded */

/* Settings: start from the SPECJIT_* environment, then override by name. Names are the
 * variables' without the prefix, in lower case: "cache_dir", "cache_readonly_dirs", "log",
 * "strict", "arch", "cache_max_size", "lock_timeout_ms", "storm_threshold", "device", ...
 * Values use the variables' syntax; a bad name or value is an error naming it. */
SPECJIT_API specjit_status specjit_settings_create(specjit_settings** out);
SPECJIT_API specjit_status specjit_settings_set(specjit_settings* settings, const char* name,
                                                const char* value);
SPECJIT_API void specjit_settings_destroy(specjit_settings* settings);

/* Engines. settings may be NULL (the environment alone). */
SPECJIT_API specjit_status specjit_engine_create(const specjit_settings* settings,
                                                 specjit_engine** out);
SPECJIT_API void specjit_engine_destroy(specjit_engine* engine);
/* Warm-up done: later compiles are logged as `serving` (refused under SPECJIT_STRICT=error). */
SPECJIT_API specjit_status specjit_engine_seal(specjit_engine* engine);

typedef struct specjit_stats {
  size_t struct_size;
  uint64_t requests; /* == memory_hits + disk_hits + compiles + failures */
  uint64_t memory_hits;
  uint64_t disk_hits;
  uint64_t compiles;
  uint64_t failures;
  uint64_t corrupt_entries;
  uint64_t write_failures;
  uint64_t storms;
} specjit_stats;
SPECJIT_API specjit_status specjit_engine_stats(const specjit_engine* engine, specjit_stats* out);

/* Kernel definitions. */
typedef enum specjit_source_kind {
  SPECJIT_SOURCE_TEXT = 0,    /* source_text holds the code; source_name names it in messages */
  SPECJIT_SOURCE_FILE = 1,    /* source_name is a path, read when the kernel is defined */
  SPECJIT_SOURCE_BUILTIN = 2  /* source_name is one of specjit's embedded kernel sources */
} specjit_source_kind;

typedef struct specjit_param {
  const char* name;   /* as shown in variants and logs, e.g. "num_tokens" */
  const char* policy; /* "dynamic", "exact", "bucketed(pow2)", "bucketed(16,64,256)",
                         "divisibility(16)", "divisibility(16)+one" */
} specjit_param;
/* How parameters reach the kernel: a `dynamic` value is not a template parameter at all (pass
 * it as an ordinary kernel argument). Every other parameter is one template parameter of the
 * function, in the order given, of an integer type: `exact` gets the value, `bucketed` the
 * bucket's upper bound, `divisibility(n)` gets n when the value is a multiple of n and 0 when
 * not (and, with +one, the value 1 gets its own variant, with 1). */

typedef struct specjit_header {
  const char* name; /* the name an #include spells, e.g. "my/tile.h" */
  const char* text;
} specjit_header;

typedef struct specjit_kernel_desc {
  size_t struct_size;
  const char* id;          /* stable kernel id: letters, digits, _ */
  int source_kind;         /* a specjit_source_kind */
  const char* source_name; /* see specjit_source_kind */
  const char* source_text; /* SPECJIT_SOURCE_TEXT only */
  const char* function;    /* the __global__ function (template), e.g. "ns::scale" */
  const specjit_param* params;
  size_t param_count;
  const char* const* include_dirs; /* searched in order, after the in-memory headers */
  size_t include_dir_count;
  const specjit_header* headers; /* in-memory headers */
  size_t header_count;
  const char* const* defines; /* "NAME" or "NAME=VALUE" */
  size_t define_count;
  const char* const* options; /* extra NVRTC options (no -I, no architecture) */
  size_t option_count;
} specjit_kernel_desc;

/* Registers a definition: validated here, once (ids, names, policies, readable sources and
 * include directories). Defining an equal definition again returns the same kernel. */
SPECJIT_API specjit_status specjit_kernel_define(specjit_engine* engine,
                                                 const specjit_kernel_desc* desc,
                                                 specjit_kernel** out);

/* Variants: one value per parameter of the definition. prepare needs no GPU (compile or disk
 * load); get also loads the module on the engine's device. */
SPECJIT_API specjit_status specjit_kernel_prepare(specjit_kernel* kernel, const int64_t* values,
                                                  size_t value_count,
                                                  const specjit_variant** out);
SPECJIT_API specjit_status specjit_kernel_get(specjit_kernel* kernel, const int64_t* values,
                                              size_t value_count, const specjit_variant** out);

typedef struct specjit_variant_info {
  size_t struct_size;
  const char* kernel;          /* the kernel id */
  const char* name_expression; /* e.g. "scale<128>" */
  const char* key;             /* the disk cache key, hex */
  const char* variant_json;    /* the template arguments as a JSON object */
  int source;                  /* how the variant reached this engine: 0 compiled, 1 disk,
                                  3 remote (a later memory hit does not change it) */
  int registers;
  int spill_bytes;
  int shared_bytes;
  double compile_ms;
} specjit_variant_info;
SPECJIT_API specjit_status specjit_variant_get_info(const specjit_variant* variant,
                                                    specjit_variant_info* out);

typedef struct specjit_launch_config {
  size_t struct_size;
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_bytes;
  void* stream; /* a CUstream; NULL for the default stream */
} specjit_launch_config;

/* Launches a loaded variant. args[i] points at argument i, sizes[i] its size in bytes; both
 * are checked against the kernel's parameters. */
SPECJIT_API specjit_status specjit_variant_launch(const specjit_variant* variant,
                                                  const specjit_launch_config* config,
                                                  void* const* args, const size_t* sizes,
                                                  size_t arg_count);
/* get + launch in one call, the hot path. If the variant is not yet ready and loaded while
 * config->stream is capturing a CUDA graph, nothing is compiled or loaded: the call returns
 * SPECJIT_ERROR_CAPTURING naming the kernel and variant. */
SPECJIT_API specjit_status specjit_kernel_launch(specjit_kernel* kernel, const int64_t* values,
                                                 size_t value_count,
                                                 const specjit_launch_config* config,
                                                 void* const* args, const size_t* sizes,
                                                 size_t arg_count);

/* Built-in ops (docs/c-api.md; their contracts in docs/). Tensors are device memory described
 * as DLPack does: data, dtype, shape and strides in elements (strides NULL: contiguous
 * row-major). Every tensor is checked (dtype, shape, contiguity, alignment, non-NULL) before
 * anything is launched; a mismatch is SPECJIT_ERROR_INVALID_ARGUMENT naming the argument. */
typedef enum specjit_dtype {
  SPECJIT_DTYPE_BF16 = 0,
  SPECJIT_DTYPE_F16 = 1,
  SPECJIT_DTYPE_F32 = 2,
  SPECJIT_DTYPE_I32 = 3,
  SPECJIT_DTYPE_I64 = 4,
  SPECJIT_DTYPE_E4M3 = 5, /* float8_e4m3fn */
  SPECJIT_DTYPE_U8 = 6
} specjit_dtype;

typedef struct specjit_tensor {
  void* data; /* a CUdeviceptr */
  int dtype;  /* a specjit_dtype */
  int ndim;   /* at most 4 */
  const int64_t* shape;
  const int64_t* strides; /* in elements; NULL: contiguous */
} specjit_tensor;

/* Fused inverse RoPE + FP8 quantization (DeepSeek-V4 attention output):
 * o bf16[T, G*heads_per_group, 512], positions i64[T], cos_sin_cache f32[max_pos, 64],
 * out_fp8 e4m3[G, T, heads_per_group*512], out_scales f32[G, heads_per_group*4, round_up(T,4)]. */
SPECJIT_API specjit_status specjit_op_inv_rope_fp8_quant(
    specjit_engine* engine, const specjit_tensor* o, const specjit_tensor* positions,
    const specjit_tensor* cos_sin_cache, const specjit_tensor* out_fp8,
    const specjit_tensor* out_scales, int64_t num_groups, int64_t heads_per_group,
    void* stream);

/* The fused MoE layer: FP8 W8A8 per-tensor (hidden e4m3, weights e4m3, f32 scales) or bf16.
 * Routing from router_logits (f32[T, E], softmax + top-k, renormalize) or, when router_logits
 * is NULL, from precomputed topk_weights f32[T, k] and topk_ids i32[T, k]. */
typedef struct specjit_moe_args {
  size_t struct_size;
  int64_t experts, top_k, hidden, intermediate;
  int renormalize;
  const specjit_tensor* hidden_states; /* [T, H] e4m3 or bf16 */
  const specjit_tensor* router_logits; /* f32[T, E], or NULL */
  const specjit_tensor* topk_weights;  /* f32[T, k] when router_logits is NULL */
  const specjit_tensor* topk_ids;      /* i32[T, k] when router_logits is NULL */
  const specjit_tensor* w13;           /* [E, 2I, H] */
  const specjit_tensor* w2;            /* [E, H, I] */
  const specjit_tensor* a1_scale;      /* fp8: f32[1] */
  const specjit_tensor* w13_scale;     /* fp8: f32[E] */
  const specjit_tensor* a2_scale;      /* fp8: f32[1] */
  const specjit_tensor* w2_scale;      /* fp8: f32[E] */
  const specjit_tensor* out;           /* bf16[T, H] */
  const specjit_tensor* workspace;     /* u8[>= specjit_moe_workspace_bytes], 256-aligned */
  /* Added after the first version (read only when struct_size covers it; zero otherwise):
   * nonzero runs FP8 GEMM1 with exact accumulation (f16 MMAs of exact conversions, bit for bit
   * the re-quantizing reference's intermediate); zero, e4m3 tensor cores where the tuned table
   * says so, as accurate against the layer's float64 truth (docs/moe.md, "Accumulation"). */
  int exact_accumulation;
} specjit_moe_args;
SPECJIT_API specjit_status specjit_moe_workspace_bytes(int64_t experts, int64_t top_k,
                                                       int64_t hidden, int64_t intermediate,
                                                       int fp8, int64_t num_tokens,
                                                       size_t* out);
SPECJIT_API specjit_status specjit_op_fused_moe(specjit_engine* engine,
                                                const specjit_moe_args* args, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* SPECJIT_SPECJIT_H */
