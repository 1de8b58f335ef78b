/* SPDX-License-Identifier: Apache-2.0 */
/* ternjit.h - the C ABI of ternjit: opaque handles, status codes, no exceptions. */
#ifndef TERNJIT_TERNJIT_H
#define TERNJIT_TERNJIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** ABI version: bumped on any incompatible change of this header or of a documented behaviour
 *  (2: ternjit_last_error() is cleared by every successful call; kernel entries set it).
 *  Structs that grow (ternjit_engine_options) only gain fields at their end, read by the
 *  library only when the caller's struct_size covers them, so a caller compiled against an
 *  older header keeps working with a newer library of the same ABI version. */
#define TERNJIT_ABI_VERSION 2

/** Every call returns one of these; on failure ternjit_last_error() says why.
 *
 *  The last-error rule: every function of this header except ternjit_abi_version,
 *  ternjit_version and ternjit_last_error clears the calling thread's message when it starts
 *  and sets it when it fails (a non-OK status, or for functions without a status, the failure
 *  their comment names). A kernel entry (ternjit_kernel_fn) follows the same rule on the
 *  thread that calls it. So after a failure the message is that failure's, and after a success
 *  it is "". Messages are per thread: a failure on one thread never shows on another. */
typedef enum ternjit_status {
  TERNJIT_OK = 0,
  TERNJIT_INVALID_INPUT = 1,    /**< source text, weight files or weight values are wrong */
  TERNJIT_INVALID_ARGUMENT = 2, /**< API misuse: null handle, bad enum, wrong count, or a caller
                                     tensor whose dtype or shape the kernel does not take */
  TERNJIT_NOT_FOUND = 3,        /**< no such layer, function, parameter or target */
  TERNJIT_UNSUPPORTED = 4,      /**< valid but not supported by this target/build */
  TERNJIT_UNAVAILABLE = 5,      /**< toolchain, device or library missing */
  TERNJIT_IO_ERROR = 6,         /**< reading or writing a file failed */
  TERNJIT_INTERNAL = 7          /**< a bug in ternjit (reported, never a crash) */
} ternjit_status;

/** Element types of caller buffers. TERNJIT_T2 buffers hold one int8 in {-1,0,1} per element. */
typedef enum ternjit_dtype {
  TERNJIT_F32 = 0,
  TERNJIT_F16 = 1,
  TERNJIT_BF16 = 2,
  TERNJIT_I8 = 3,
  TERNJIT_U8 = 4,
  TERNJIT_I32 = 5,
  TERNJIT_T2 = 6
} ternjit_dtype;

/** Storage formats of ternary weights handed to ternjit_bind_weight. */
typedef enum ternjit_format {
  TERNJIT_FORMAT_PLAIN = 0,    /**< one int8 per element (dtype TERNJIT_T2 or TERNJIT_I8) */
  TERNJIT_FORMAT_TERN2 = 1,    /**< 2 bits, code = value + 1, 4 per byte (u8 bytes) */
  TERNJIT_FORMAT_TERN2_SM = 2, /**< 2-bit sign-magnitude, 4 per byte */
  TERNJIT_FORMAT_TERN1_6 = 3,  /**< base 3, 5 per byte */
  TERNJIT_FORMAT_BITPLANE = 4  /**< positive and negative 64-bit masks per 64 elements */
} ternjit_format;

typedef struct ternjit_engine ternjit_engine;   /**< compiles programs; thread-safe */
typedef struct ternjit_program ternjit_program; /**< a compiled module + bound weights; thread-safe */
typedef struct ternjit_kernel ternjit_kernel;   /**< one function specialized for one shape */

/** A caller-owned tensor: row-major, contiguous. */
typedef struct ternjit_tensor {
  void* data;
  ternjit_dtype dtype;
  int32_t rank;
  const int64_t* shape; /**< rank extents */
} ternjit_tensor;

/** Engine options; initialize with ternjit_engine_options_init, then set fields. */
typedef struct ternjit_engine_options {
  uint32_t struct_size;  /**< sizeof(ternjit_engine_options), set by _init */
  const char* target;    /**< "auto" (default) or a target name ("reference", ...) */
  int32_t opt_level;     /**< 0..3, default 2 */
  int32_t threads;       /**< 0: the target's default */
  const char* cache_dir; /**< NULL/"": $XDG_CACHE_HOME/ternjit (else ~/.cache/ternjit); "off": no disk cache */
  int32_t verbose;       /**< 1: one trace line per compile/specialization on stderr */
  /* Fields below were added after ABI 1's first struct; struct_size tells which a caller has. */
  const char* max_isa;   /**< NULL/"": none; else the value of the target option whose alias is "max_isa"
                              (x86.max_isa: "avx2", "avx_vnni", "avx512", "avx512_vnni" or "amx", the
                              highest x86 code path), kept as a field for callers of ABI 1 */
  /** A host thread pool for kernel work (NULL: the engine's own): must call task(context, i) once
   *  for every i in [0, n), from any threads, and return when all calls returned. */
  void (*parallel_for)(void* pool, void (*task)(void* context, int64_t i), void* context, int64_t n);
  void* parallel_pool;   /**< first argument of parallel_for */
  uint64_t cache_max_bytes;   /**< cap on the disk cache's artifacts (LRU); 0: the default (1 GiB) */
  int32_t cache_shared_group; /**< 1: accept a cache directory shared by a Unix group (cache/README.md) */
  /** NULL/"": none; else each target's own options, "TARGET.NAME=VALUE;..." ("x86.max_isa=avx2",
   *  "llvm.cpu=znver4"), validated by the targets (an unknown one is TERNJIT_INVALID_ARGUMENT).
   *  max_isa above is an alias of x86.max_isa; the two must agree. */
  const char* target_options;
  const char* tuning; /**< NULL/"": "cached" (use tuning records); "off" or "tune" (tune at first call) */
  /* ABI 2. */
  /** NULL: verbose trace lines go to stderr; else each line (without '\n', `len` bytes, not
   *  NUL-terminated) is passed here, from whichever thread compiles, possibly concurrently. */
  void (*trace)(void* context, const char* line, size_t len);
  void* trace_context; /**< first argument of trace */
} ternjit_engine_options;

/** The ABI version this library was built with (TERNJIT_ABI_VERSION). */
uint32_t ternjit_abi_version(void);
/** The library version string ("0.1.0"). */
const char* ternjit_version(void);
/** 1 if a feature is present ("target:reference", "target:x86", "safetensors", ...), else 0. */
int ternjit_has_feature(const char* name);
/** Every name ternjit_has_feature knows, comma-separated ("safetensors,...,target:cuda,..."):
 *  the fixed features, then "target:NAME" for each target of this build's registry, present
 *  here or not. Static storage, valid for the life of the process. */
const char* ternjit_feature_names(void);
/** The message of this thread's last call if it failed, else "" (the rule above). Valid until
 *  the thread's next call into the library. */
const char* ternjit_last_error(void);

/** Sets defaults: target "auto", opt_level 2, threads 0, cache_dir NULL, verbose 0, max_isa NULL,
 *  parallel_for NULL, cache_max_bytes 0, cache_shared_group 0, target_options NULL, tuning NULL,
 *  trace NULL. A NULL `options` is a failure (ternjit_last_error says so). */
void ternjit_engine_options_init(ternjit_engine_options* options);
/** The same for a caller whose struct is `size` bytes (a binding that declares the struct
 *  itself, possibly from an older header of this ABI version): only fields that end within
 *  `size` are written, and struct_size is set to `size`. A size below the first struct's
 *  (up to `verbose`) is a failure that writes nothing. */
void ternjit_engine_options_init_sized(ternjit_engine_options* options, size_t size);
/** Creates an engine from explicit options (NULL: defaults). */
ternjit_status ternjit_engine_create(const ternjit_engine_options* options, ternjit_engine** out);
/** Creates an engine from the environment (TERNJIT_TARGET, TERNJIT_OPT_LEVEL, TERNJIT_THREADS,
 *  TERNJIT_TARGET_OPTIONS, TERNJIT_MAX_ISA, TERNJIT_CACHE_DIR, TERNJIT_TUNING, TERNJIT_VERBOSE). */
ternjit_status ternjit_engine_create_from_env(ternjit_engine** out);
/** Destroys an engine; programs made from it must be destroyed first. NULL is a no-op. */
void ternjit_engine_destroy(ternjit_engine* engine);

/** Compiles `.tri` DSL source (len bytes; file_name for diagnostics, may be NULL). */
ternjit_status ternjit_compile(ternjit_engine* engine, const char* source, size_t len, const char* file_name,
                               ternjit_program** out);
/** ternjit_grad_options.flags: straight-through estimators pass the gradient only where the
 *  quantizer's input lies in its range (|x| <= 1 for ternarize, |x| <= mean|x| for
 *  ternarize_absmean). */
#define TERNJIT_GRAD_STE_CLIP 1u
/** ternjit_grad_options.flags: lower precision, opt in (changes the gradients): the input
 *  gradient of a ternary matmul quantizes the incoming gradient to int8 per row and runs
 *  on the int8 ternary kernel (GradOptions::int8_dx). Weight gradients stay exact f32. */
#define TERNJIT_GRAD_INT8_DX 2u
/** ternjit_grad_options.flags: lower precision, opt in (changes the gradients): the weight
 *  gradient of a ternary matmul runs as an exact int8 x int8 -> int32 matmul on the int8
 *  activations and the incoming gradient quantized per output column
 *  (GradOptions::int8_dw; feature "autodiff-int8-dw"). */
#define TERNJIT_GRAD_INT8_DW 4u
/** Compiles `.tri` source as ternjit_compile does, after adding the reverse-mode gradient of
 *  `function` ("Layer.forward"): "Layer.forward.fwd" (its results, then the saved tensors) and
 *  "Layer.forward.bwd" (arguments: the function's, one gradient per float result, the saved
 *  tensors; results: one gradient per wrt entry). `wrt` holds n_wrt names, "x" for an argument
 *  or "@Layer.w" for a parameter (a ternary parameter's gradient is f32: the latent weights');
 *  n_wrt = 0: every float argument and every float or ternary parameter the function reads.
 *  flags: 0 or TERNJIT_GRAD_STE_CLIP | TERNJIT_GRAD_INT8_DX | TERNJIT_GRAD_INT8_DW. docs/training.md has the
 *  details. (Added in ABI 2; feature "autodiff"; TERNJIT_GRAD_INT8_DX with feature
 *  "autodiff-int8-dx", TERNJIT_GRAD_INT8_DW with "autodiff-int8-dw".) */
ternjit_status ternjit_compile_grad(ternjit_engine* engine, const char* source, size_t len, const char* file_name,
                                    const char* function, const char* const* wrt, size_t n_wrt, uint32_t flags,
                                    ternjit_program** out);
/** Destroys a program and the kernels it handed out, except those retained
 *  (ternjit_kernel_retain): they, and what they read, live until their last release. NULL is
 *  a no-op. */
void ternjit_program_destroy(ternjit_program* program);

/** Binds parameter `name` ("Layer.param") from caller memory (copied; repacked once). Plain
 *  float/int parameters take their declared dtype; ternary ones take TERNJIT_T2/TERNJIT_I8
 *  values in {-1,0,1} with TERNJIT_FORMAT_PLAIN, or U8 bytes in a packed format. `data`
 *  must hold exactly the bytes `shape` needs (plain: elements * dtype size; tern2 and
 *  tern2-sm ceil(n/4), tern1.6 ceil(n/5), bitplane 16*ceil(n/64) for n elements): that
 *  many are read. */
ternjit_status ternjit_bind_weight(ternjit_program* program, const char* name, const void* data, ternjit_dtype dtype,
                                   ternjit_format format, const int64_t* shape, int32_t rank);
/** ternjit_bind_weight, told the buffer's length: `nbytes` other than the bytes `shape` needs
 *  in `format` is TERNJIT_INVALID_ARGUMENT and nothing is read. (Added in ABI 2; feature
 *  "bind-sized".) */
ternjit_status ternjit_bind_weight_sized(ternjit_program* program, const char* name, const void* data, size_t nbytes,
                                         ternjit_dtype dtype, ternjit_format format, const int64_t* shape,
                                         int32_t rank);
/** Binds every parameter found in a weights file ("Layer.param" or "param"): safetensors, GGUF
 *  (TQ1_0/TQ2_0 with scales as "<name>_scale", F32/F16/BF16/Q8_0) or a Hugging Face BitNet
 *  checkpoint, told apart by content. */
ternjit_status ternjit_bind_weights_file(ternjit_program* program, const char* path);
/** ternjit_bind_weights_file with n_rules name-map rules "PATTERN=TARGET" renaming file tensors
 *  ("model.layers.{i}.mlp.up_proj.weight=L{i}.w"). (Added in ABI 2; feature "name-map".) */
ternjit_status ternjit_bind_weights_file_mapped(ternjit_program* program, const char* path, const char* const* rules,
                                                size_t n_rules);
/** Binds every still-unbound parameter to random values drawn from `seed`. */
ternjit_status ternjit_bind_random(ternjit_program* program, uint64_t seed);

/** Runs `function` ("Layer.forward") on caller buffers; outputs must have the result shapes. */
ternjit_status ternjit_run(ternjit_program* program, const char* function, const ternjit_tensor* inputs,
                           size_t n_inputs, ternjit_tensor* outputs, size_t n_outputs);

/** Specializes `function` for the shapes of `inputs` (data may be NULL). The kernel is owned by
 *  the program (valid while it lives) unless retained; the same shapes return the same kernel. */
ternjit_status ternjit_get_kernel(ternjit_program* program, const char* function, const ternjit_tensor* inputs,
                                  size_t n_inputs, ternjit_kernel** out);
/** Number of outputs, and the dtype/rank/shape of output i (shape points into the kernel). */
size_t ternjit_kernel_num_outputs(const ternjit_kernel* kernel);
ternjit_status ternjit_kernel_output(const ternjit_kernel* kernel, size_t i, ternjit_dtype* dtype, int32_t* rank,
                                     const int64_t** shape);

/** A tensor as a program declares it. Pointers are owned by the program and valid while it lives. */
typedef struct ternjit_tensor_decl {
  const char* name;           /**< the argument's or parameter's name; "" for a result */
  ternjit_dtype dtype;        /**< declared element type (TERNJIT_T2 for ternary; bool reads as TERNJIT_U8) */
  int32_t rank;
  const int64_t* extents;     /**< rank entries: the static extent, or -1 where the dim is a symbol */
  const char* const* symbols; /**< rank entries: the symbol's name ("K"), or NULL where the dim is static */
} ternjit_tensor_decl;

/** Number of functions of the program (its module's, in declaration order). 0 for NULL (a failure). */
size_t ternjit_program_num_functions(const ternjit_program* program);
/** Function `index`: its name ("Layer.forward") and argument and result counts (each out may be NULL). */
ternjit_status ternjit_program_function(const ternjit_program* program, size_t index, const char** name,
                                        size_t* n_inputs, size_t* n_outputs);
/** Argument `i` of function `index` as declared (symbolic dims by name). */
ternjit_status ternjit_program_function_input(const ternjit_program* program, size_t index, size_t i,
                                              ternjit_tensor_decl* out);
/** Result `i` of function `index` as declared. */
ternjit_status ternjit_program_function_output(const ternjit_program* program, size_t index, size_t i,
                                               ternjit_tensor_decl* out);
/** Number of parameters ("Layer.param") of the program. 0 for NULL (a failure). */
size_t ternjit_program_num_params(const ternjit_program* program);
/** Parameter `i` as declared, and whether a value is bound to it now (1) or not (0); `bound` may be NULL. */
ternjit_status ternjit_program_param(const ternjit_program* program, size_t i, ternjit_tensor_decl* out,
                                     int32_t* bound);

/** The calling convention of a fetched kernel: `buffers` holds the input data pointers in
 *  argument order, then the output data pointers in result order, each contiguous with the
 *  shapes the kernel was specialized for. Returns a ternjit_status (0 on success) and follows the
 *  last-error rule; safe to call from several threads at once. */
typedef int32_t (*ternjit_kernel_fn)(const void* state, void* const* buffers);
/** The plain function pointer and the state to pass it, valid while the program lives or the
 *  kernel is retained. */
ternjit_status ternjit_kernel_entry(const ternjit_kernel* kernel, ternjit_kernel_fn* fn, const void** state);

/** Counted references to a kernel: while one is held the kernel (its outputs, entry and state,
 *  device handles) and what it reads (the program's weights and code, the engine's pool) stay
 *  alive and correct after ternjit_program_destroy or ternjit_engine_destroy; the memory goes
 *  with the last release. Each retain needs one release (a release without one is
 *  INVALID_ARGUMENT). Thread-safe. (Added in ABI 2; feature "kernel-retain".) */
ternjit_status ternjit_kernel_retain(const ternjit_kernel* kernel);
ternjit_status ternjit_kernel_release(const ternjit_kernel* kernel);

/** GPU targets: the framework launch path. The kernel runs on the framework's own device
 *  buffers and queue or stream; ternjit submits nothing and waits for nothing.
 *  ternjit_kernel_device writes the native handles of the device the kernel runs on
 *  (spirv: VkInstance, VkPhysicalDevice, VkDevice, VkQueue, the queue family index; cuda:
 *  the device's primary CUcontext and its CUdevice; hip: the device index) into
 *  handles[0 .. *count) and sets *count to how many there are (UNSUPPORTED for a CPU
 *  target; INVALID_ARGUMENT when *count is too small, with *count set to the number needed).
 *  ternjit_kernel_launch enqueues the kernel: spirv records its dispatches into `stream`, a
 *  VkCommandBuffer in the recording state on that device, on `buffers` (VkBuffer handles
 *  cast to void*: inputs then outputs, STORAGE_BUFFER usage, each at least its tensor's
 *  bytes rounded up to 16, plus 16); cuda and hip launch on `stream` (a CUstream /
 *  hipStream_t of that device; null: the legacy default stream) reading and writing
 *  `buffers` (device pointers, inputs then outputs, each holding its tensor contiguously,
 *  16-byte aligned, else INVALID_ARGUMENT). Ownership and synchronization:
 *  targets/README.md, "GPU targets". */
ternjit_status ternjit_kernel_device(const ternjit_kernel* kernel, uintptr_t* handles, size_t* count);
ternjit_status ternjit_kernel_launch(const ternjit_kernel* kernel, void* stream, void* const* buffers);

/** A BitNet b1.58 decoder's shape, as llama.cpp's `bitnet` GGUF metadata gives it (the C++
 *  ternjit::BitNetConfig of ternjit/bitnet.h; fill struct_size with sizeof). (Added in ABI 2;
 *  feature "bitnet-gguf".) ffn_activation (feature "bitnet-activation"): 0 relu(g)^2 (the
 *  published 2B4T; a file without bitnet.hidden_activation), 1 silu(g) (llama.cpp's graph);
 *  a caller built before it (struct_size ending at rms_eps) reads and writes relu^2 models.
 *  embedding, kv_cache (feature "bitnet-dtypes"): the token table's and the KV caches' element
 *  types, 0 f16 (as a caller built before them gets), 1 bf16, 2 f32; separate_head: 0 the head
 *  is the token table, 1 its own table `output` (ternjit::BitNetConfig::separate_head). */
typedef struct ternjit_bitnet_config {
  size_t struct_size;
  int64_t blocks, hidden, heads, kv_heads, ffn, vocab, context;
  double rope_theta, rms_eps;
  int32_t ffn_activation;
  int32_t embedding, kv_cache, separate_head;
} ternjit_bitnet_config;
/** Reads the configuration of the `bitnet` GGUF file at `path` into *config. */
ternjit_status ternjit_read_bitnet_config(const char* path, ternjit_bitnet_config* config);
/** Writes a synthetic `bitnet` model of *config (random TQ2_0 ternary weights from `seed`,
 *  llama.cpp's tensor names and metadata) to `path`. */
ternjit_status ternjit_write_synthetic_bitnet(const char* path, const ternjit_bitnet_config* config, uint64_t seed);
/** The decoder's `.tri` source for *config with a KV cache of `capacity` rows (ternjit::bitnet_tri_source)
 *  into buf[0 .. *len): on entry *len is buf's size; on return the source's length without the
 *  terminating NUL. INVALID_ARGUMENT (with *len set to the size needed, NUL included) when buf is
 *  NULL or too small; INVALID_ARGUMENT naming the field for a config ternjit_read_bitnet_config
 *  would refuse (the same checks, but for the file's multiples of 256) or a capacity outside
 *  1 .. 2^31. */
ternjit_status ternjit_bitnet_tri_source(const ternjit_bitnet_config* config, int64_t capacity, char* buf, size_t* len);
/** A Hugging Face BitNet checkpoint directory (ternjit::read_hf_bitnet_config; feature
 *  "hf-bitnet-dir"): its decoder into *config (struct_size covering kv_cache), and, when
 *  `weights` is not NULL, how it stores its projections (0 packed, 1 float master weights). */
ternjit_status ternjit_read_hf_bitnet_config(const char* dir, ternjit_bitnet_config* config, int32_t* weights);
/** Binds the checkpoint directory `dir` to layer `layer` (NULL: "BitNet") of a program compiled
 *  from its decoder's source (ternjit::bind_hf_bitnet); every parameter of the layer must bind. */
ternjit_status ternjit_bind_hf_bitnet(ternjit_program* program, const char* dir, const char* layer);

/* ------------------------------------------------------------------ DLPack (feature "dlpack") */
/** DLPack 1.x tensors in and out. The types below are the DLPack specification's (its
 *  dlpack.h 1.0: the struct layouts and enumerator values are the ABI, unchanged through
 *  1.x), declared here once and only when no dlpack.h was included before this header: a
 *  caller's own dlpack.h of version >= 1 (torch's, a system one) included FIRST is used
 *  instead (include it after ternjit.h and the two definitions collide). A dlpack.h older
 *  than 1.0 (no DLManagedTensorVersioned; Debian's libdlpack-dev 0.6: DLPACK_VERSION, no
 *  DLPACK_MAJOR_VERSION) is an error. */
#if defined(DLPACK_MAJOR_VERSION)
#if DLPACK_MAJOR_VERSION < 1
#error "ternjit.h needs DLPack 1.x (DLManagedTensorVersioned): the dlpack.h included first is older"
#endif
#elif defined(DLPACK_VERSION) || defined(DLPACK_DLPACK_H_)
/* DLPack 0.x says DLPACK_VERSION (60 for 0.6) and no major version. */
#error "ternjit.h needs DLPack 1.x (DLManagedTensorVersioned): the dlpack.h included first is older"
#else
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 0
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;
typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17
} DLDeviceType;
typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;
typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U
} DLDataTypeCode;
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;
#endif

/** ternjit_run on DLPack tensors: inputs and outputs are borrowed (never deleted: the
 *  caller keeps ownership and calls the deleters). Each must have version.major 1, be on
 *  kDLCPU, of a dtype ternjit takes (float32, float16, bfloat16, int8, uint8, int32; lanes
 *  1) and compact row-major (strides NULL, or equal to a contiguous layout's, where dims of
 *  extent 1 may have any stride); data + byte_offset is the first element. An output must
 *  not have DLPACK_FLAG_BITMASK_READ_ONLY. Anything else is TERNJIT_INVALID_ARGUMENT naming
 *  the tensor and what is wrong (a copy is never made). (Feature "dlpack".) */
ternjit_status ternjit_run_dlpack(ternjit_program* program, const char* function,
                                  DLManagedTensorVersioned* const* inputs, size_t n_inputs,
                                  DLManagedTensorVersioned* const* outputs, size_t n_outputs);
/** The ternjit_tensor view of a DLPack tensor under ternjit_run_dlpack's rules (`writable`:
 *  also refuse a read-only one); out->shape points into `tensor`. */
ternjit_status ternjit_tensor_from_dlpack(const DLManagedTensorVersioned* tensor, int32_t writable,
                                          ternjit_tensor* out);

/* ------------------------------------------------- the ternary matmul dispatch (feature "tmatmul-dispatch") */
/** A kernel for host code without .tri text (docs/c_abi.md, "Ternary matmul dispatch"):
 *  y[m, N] = act(acc * x_scale * w_scale + bias + residual), acc = x[m, K] @ W[K, N] with W
 *  ternary, each part only when the descriptor asks for it. */

/** ternjit_tmatmul_desc.m for a kernel that serves every row count 1..m_max. */
#define TERNJIT_TMATMUL_ANY_M (-1)

/** How the weight W[K, N] is passed to each call (ternjit_tmatmul_args.w). */
typedef enum ternjit_tmatmul_weight {
  TERNJIT_TMATMUL_W_TERN2 = 0,      /**< element k*N+n, 2 bits, code = value + 1, 4 per byte: ceil(K*N/4) bytes */
  TERNJIT_TMATMUL_W_TERN1_6 = 1,    /**< element k*N+n, base 3, 5 per byte: ceil(K*N/5) bytes */
  TERNJIT_TMATMUL_W_GGUF_TQ2_0 = 2, /**< a GGUF TQ2_0 tensor of dims (K, N): N rows of K/256 blocks of 66
                                         bytes, each with its f16 scale (K % 256 == 0) */
  TERNJIT_TMATMUL_W_GGUF_TQ1_0 = 3, /**< the same in TQ1_0 blocks of 54 bytes */
  TERNJIT_TMATMUL_W_GGUF_Q2_0 = 4   /**< a GGUF (ggml) Q2_0 tensor of dims (K, N): N rows of K/64 blocks of 18
                                         bytes { f16 d; uint8 qs[16] }, element j at (qs[j/4] >> 2*(j%4)) & 3,
                                         value = code - 1 (K % 64 == 0); code 3 (+2, not ternary) is refused */
} ternjit_tmatmul_weight;

/** The activation x[m, K] of each call. */
typedef enum ternjit_tmatmul_x {
  TERNJIT_TMATMUL_X_F32 = 0,
  TERNJIT_TMATMUL_X_BF16 = 1, /**< widened to f32 exactly, then as f32 */
  TERNJIT_TMATMUL_X_I8 = 2,   /**< int8 with a per-row f32 scale (args.x_scale[m]): exact int32 sums */
  /** f32 quantized per row to int8 inside the kernel, then as TERNJIT_TMATMUL_X_I8 with that
   *  row scale (BitNet b1.58's activation quantization; the IR's quantize_int8): per row,
   *  s = max|x| / 127 (f32 division), q = clamp(round_half_even(x / s), -127, 127) (an f32
   *  division). An all-zero row gives s = 0, q = 0 (its sums are 0); a row holding a NaN
   *  or an infinity gives s = NaN, so every output of that row is NaN. args.x_scale is NULL. */
  TERNJIT_TMATMUL_X_F32_ROW_I8 = 3
} ternjit_tmatmul_x;

/** The weight scale a call passes (args.w_scale), applied to the sum. GGUF weights carry
 *  their own per-block scale (a group of 256 along K; 64 for Q2_0) in addition. */
typedef enum ternjit_tmatmul_scale {
  TERNJIT_TMATMUL_SCALE_NONE = 0,
  TERNJIT_TMATMUL_SCALE_COLUMN = 1, /**< f32[N] */
  TERNJIT_TMATMUL_SCALE_GROUP = 2   /**< f32[ceil(K / group), N]: row g scales the sum over k in
                                         [g*group, (g+1)*group) (ir/README.md, tmatmul) */
} ternjit_tmatmul_scale;

/** The activation function, applied last. */
typedef enum ternjit_tmatmul_act {
  TERNJIT_TMATMUL_ACT_NONE = 0,
  TERNJIT_TMATMUL_ACT_RELU = 1,
  TERNJIT_TMATMUL_ACT_RELU2 = 2, /**< relu(y)^2 (BitNet's FFN) */
  TERNJIT_TMATMUL_ACT_SILU = 3,
  TERNJIT_TMATMUL_ACT_GELU = 4   /**< the erf form */
} ternjit_tmatmul_act;

/** ternjit_tmatmul_desc.flags: add args.bias f32[N]. */
#define TERNJIT_TMATMUL_BIAS 1u
/** ternjit_tmatmul_desc.flags: add args.residual f32[m, N] (before the activation). */
#define TERNJIT_TMATMUL_RESIDUAL 2u

/** What a dispatched kernel computes; initialize with ternjit_tmatmul_desc_init, then set
 *  fields. Two descriptors with equal fields get the same kernel. */
typedef struct ternjit_tmatmul_desc {
  uint32_t struct_size;             /**< sizeof(ternjit_tmatmul_desc), set by _init */
  int64_t m;                        /**< rows of every call, or TERNJIT_TMATMUL_ANY_M */
  int64_t m_max;                    /**< with TERNJIT_TMATMUL_ANY_M: the most rows a call passes */
  int64_t k, n;                     /**< the weight is W[K, N] */
  ternjit_tmatmul_weight weight;    /**< default TERN2 */
  ternjit_tmatmul_x x;              /**< default F32 */
  ternjit_tmatmul_scale scale;      /**< default NONE */
  int64_t group;                    /**< TERNJIT_TMATMUL_SCALE_GROUP: the group's length along K (>= 1) */
  uint32_t flags;                   /**< TERNJIT_TMATMUL_BIAS | TERNJIT_TMATMUL_RESIDUAL */
  ternjit_tmatmul_act act;          /**< default NONE */
  int32_t threads;                  /**< 0: the engine's; else the kernel runs on that many threads */
} ternjit_tmatmul_desc;

/** The buffers of one call, all row-major and contiguous; pointers the descriptor does not
 *  ask for must be NULL. */
typedef struct ternjit_tmatmul_args {
  const void* x;         /**< [m, K] of the descriptor's x kind */
  const float* x_scale;  /**< [m] (TERNJIT_TMATMUL_X_I8) */
  const void* w;         /**< the weight in the descriptor's format */
  const float* w_scale;  /**< [N] or [ceil(K / group), N] */
  const float* bias;     /**< [N] */
  const float* residual; /**< [m, N] */
  float* y;              /**< [m, N], written; must not overlap the others */
  int64_t m;             /**< this call's rows: desc.m, or 1..m_max for TERNJIT_TMATMUL_ANY_M */
} ternjit_tmatmul_args;

/** A dispatched kernel: returns a ternjit_status (0 on success) and follows the last-error
 *  rule; safe to call from several threads at once. The weight is passed per call in its
 *  own format: the kernel keeps the last 4 weights it was given with their w_scale and bias
 *  (a copy of their bytes and their packed form) and compares the bytes at args.w,
 *  args.w_scale and args.bias with those copies on every call (new or changed values, at
 *  any address, are packed again), so a call reads the weight bytes once more than the
 *  matmul does. */
typedef int32_t (*ternjit_tmatmul_fn)(const void* state, const ternjit_tmatmul_args* args);

/** Sets defaults: m 1, m_max 0, k 0, n 0, TERN2, F32, no scale, group 0, flags 0, act NONE,
 *  threads 0. A NULL `desc` is a failure (ternjit_last_error says so). */
void ternjit_tmatmul_desc_init(ternjit_tmatmul_desc* desc);
/** The kernel of *desc on `engine` and the state to pass it, both valid while the engine
 *  lives. The first dispatch of a descriptor compiles its layer through the engine's normal
 *  flow (disk cache and tuning included) for m (or m_max) rows; later ones are a lookup by
 *  the descriptor's fields. Errors: INVALID_ARGUMENT (a field out of range, an unknown enum
 *  value or flag, K not a multiple of 256 for a GGUF TQ weight or of 64 for Q2_0), UNSUPPORTED (a combination the
 *  engine does not compute: the message names it). (Feature "tmatmul-dispatch".) */
ternjit_status ternjit_tmatmul_dispatch(ternjit_engine* engine, const ternjit_tmatmul_desc* desc,
                                        ternjit_tmatmul_fn* fn, const void** state);

/* ------------------------------------------------- bound weights (feature "tmatmul-bound") */
/** A weight (with its w_scale and bias) bound once to a descriptor's kernel. */
typedef struct ternjit_tmatmul_bound ternjit_tmatmul_bound;

/** Binds `w` (`w_bytes` long: exactly the bytes the descriptor's format needs, else
 *  INVALID_ARGUMENT), `w_scale` and `bias` (each non-NULL exactly when the descriptor asks
 *  for it) to the kernel of *desc on `engine`; the caller's buffers may be freed after
 *  (only the packed form the kernel reads is kept, no copy of the caller's bytes). *out is
 *  NULL on error. Errors: as ternjit_tmatmul_dispatch, INVALID_ARGUMENT for a NULL or a
 *  wrong-sized buffer, INVALID_INPUT for weight bytes that are not ternary (the message
 *  names the row and block, or the element). (Feature "tmatmul-bound".) */
ternjit_status ternjit_tmatmul_bind(ternjit_engine* engine, const ternjit_tmatmul_desc* desc, const void* w,
                                    size_t w_bytes, const float* w_scale, const float* bias,
                                    ternjit_tmatmul_bound** out);
/** The kernel entry of a bound weight, called as a dispatched one except that args.w,
 *  args.w_scale and args.bias must be NULL (INVALID_ARGUMENT otherwise): a call reads only
 *  x (x_scale, residual) and writes y, with no compare. Safe from several threads at once;
 *  valid while the bound weight lives. */
ternjit_status ternjit_tmatmul_bound_entry(const ternjit_tmatmul_bound* bound, ternjit_tmatmul_fn* fn,
                                           const void** state);
/** Host bytes the bound weight holds resident: its weight, block scales, w_scale and bias
 *  in their stored form (ternary at 2 bits a value) plus the panels the kernels packed from
 *  them. Packing happens when a row count's kernel is first made: bind makes the one of m
 *  (or m_max) rows, so this counts at least that; another M bucket of an ANY_M kernel may
 *  add a pack of its own later. 0 for NULL. */
size_t ternjit_tmatmul_bound_bytes(const ternjit_tmatmul_bound* bound);
/** Frees a bound weight (NULL: no-op). Its engine must still live. */
void ternjit_tmatmul_bound_destroy(ternjit_tmatmul_bound* bound);

#ifdef __cplusplus
}
#endif

#endif /* TERNJIT_TERNJIT_H */
