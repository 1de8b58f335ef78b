/* SPDX-License-Identifier: Apache-2.0 */
/* c_api_test.c - the C ABI from C11: compile, bind, run and fetch the BitLinear kernel; error paths. */
/*
 * Usage: c_api_test BITLINEAR_TRI [TARGET...]   (targets default to "reference" and "auto")
 *
 * For each target: creates an engine, compiles tests/dsl/bitlinear.tri from its text,
 * binds the weights as plain int8 ternary values (and, in a second program, tern2-packed
 * bytes), runs BitLinear.forward for several M, fetches the kernel and calls its plain
 * function pointer, and compares everything with bitlinear_ref.h (tolerance stated
 * there). Then checks the error paths: each gives a status and a last_error message.
 * Exit 0 when every check passes, 1 otherwise (each failure printed).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bitlinear_ref.h"
#include "ternjit/ternjit.h"

static int g_failures = 0;
static const char* g_name = "c_api_test"; /* argv[0]'s base name: names this run's temp files */

#define CHECK(cond)                                                       \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                       \
    }                                                                     \
  } while (0)

/* Checks that a call succeeded; on failure prints the status and ternjit_last_error(). */
#define CHECK_OK(call)                                                                              \
  do {                                                                                              \
    ternjit_status st_ = (call);                                                                    \
    if (st_ != TERNJIT_OK) {                                                                        \
      fprintf(stderr, "%s:%d: %s returned %d: %s\n", __FILE__, __LINE__, #call, (int)st_,           \
              ternjit_last_error());                                                                \
      ++g_failures;                                                                                 \
    }                                                                                               \
  } while (0)

/* Checks that a call failed with `want` (or `also`, when a failure fits two classes) and
 * left a non-empty message containing `needle` (NULL: any message). */
static void expect_error2(const char* what, ternjit_status got, ternjit_status want, ternjit_status also,
                          const char* needle) {
  const char* msg = ternjit_last_error();
  if (got != want && got != also) {
    fprintf(stderr, "%s: status %d, expected %d (message: %s)\n", what, (int)got, (int)want, msg);
    ++g_failures;
    return;
  }
  if (msg == NULL || msg[0] == '\0') {
    fprintf(stderr, "%s: empty last_error message\n", what);
    ++g_failures;
    return;
  }
  if (needle != NULL && strstr(msg, needle) == NULL) {
    fprintf(stderr, "%s: message does not mention '%s': %s\n", what, needle, msg);
    ++g_failures;
    return;
  }
  printf("  ok: %s -> %d: %.160s\n", what, (int)got, msg);
}

static void expect_error(const char* what, ternjit_status got, ternjit_status want, const char* needle) {
  expect_error2(what, got, want, want, needle);
}

enum { K = 64, N = 32, MAX_M = 5 };

/* Binds gamma, w and w_scale of `L` into `p`; w packed as tern2 when `packed`. */
static void bind_layer(ternjit_program* p, const bl_layer* L, int packed) {
  const int64_t k_shape[1] = {K};
  const int64_t n_shape[1] = {N};
  const int64_t w_shape[2] = {K, N};
  CHECK_OK(ternjit_bind_weight(p, "BitLinear.gamma", L->gamma, TERNJIT_F32, TERNJIT_FORMAT_PLAIN, k_shape, 1));
  CHECK_OK(ternjit_bind_weight(p, "BitLinear.w_scale", L->w_scale, TERNJIT_F32, TERNJIT_FORMAT_PLAIN, n_shape, 1));
  if (packed) {
    uint8_t bytes[(K * N + 3) / 4];
    bl_pack_tern2(L->w, K * N, bytes);
    /* Packed weights take the logical shape of the parameter; the bytes are U8. */
    CHECK_OK(ternjit_bind_weight(p, "BitLinear.w", bytes, TERNJIT_U8, TERNJIT_FORMAT_TERN2, w_shape, 2));
  } else {
    CHECK_OK(ternjit_bind_weight(p, "BitLinear.w", L->w, TERNJIT_T2, TERNJIT_FORMAT_PLAIN, w_shape, 2));
  }
}

/* Runs BitLinear.forward for M = 1..MAX_M through ternjit_run and through the fetched
 * kernel's function pointer, comparing both with the reference. */
static void check_layer(ternjit_program* p, const bl_layer* L, const char* label) {
  int64_t M;
  for (M = 1; M <= MAX_M; ++M) {
    float x[MAX_M * K], want[MAX_M * N], got[MAX_M * N], got_fn[MAX_M * N];
    double bound[MAX_M * N];
    const int64_t x_shape[2] = {M, K};
    const int64_t y_shape[2] = {M, N};
    ternjit_tensor in;
    ternjit_tensor out;
    ternjit_kernel* kernel = NULL;
    ternjit_kernel* again = NULL;
    char what[96];
    size_t i;

    bl_input(L, M, (uint64_t)(100 + M), x);
    if (bl_reference(L, M, x, want, bound) != 0) {
      ++g_failures;
      return;
    }
    for (i = 0; i < (size_t)(M * N); ++i) got[i] = got_fn[i] = -1.0f;

    in.data = x;
    in.dtype = TERNJIT_F32;
    in.rank = 2;
    in.shape = x_shape;
    out.data = got;
    out.dtype = TERNJIT_F32;
    out.rank = 2;
    out.shape = y_shape;
    CHECK_OK(ternjit_run(p, "BitLinear.forward", &in, 1, &out, 1));
    snprintf(what, sizeof what, "%s ternjit_run M=%lld", label, (long long)M);
    g_failures += bl_compare(what, M * N, got, want, bound) != 0;

    /* The kernel for the same shape, called through the plain function pointer. */
    in.data = NULL; /* shapes only */
    CHECK_OK(ternjit_get_kernel(p, "BitLinear.forward", &in, 1, &kernel));
    CHECK_OK(ternjit_get_kernel(p, "BitLinear.forward", &in, 1, &again));
    CHECK(kernel != NULL && kernel == again);
    if (kernel != NULL) {
      ternjit_dtype dt = TERNJIT_I8;
      int32_t rank = 0;
      const int64_t* shape = NULL;
      ternjit_kernel_fn fn = NULL;
      const void* state = NULL;
      void* buffers[2];
      CHECK(ternjit_kernel_num_outputs(kernel) == 1);
      CHECK_OK(ternjit_kernel_output(kernel, 0, &dt, &rank, &shape));
      CHECK(dt == TERNJIT_F32 && rank == 2 && shape != NULL && shape[0] == M && shape[1] == N);
      if (M == 1)
        expect_error("kernel output index out of range", ternjit_kernel_output(kernel, 1, &dt, &rank, &shape),
                     TERNJIT_INVALID_ARGUMENT, "out of range");
      CHECK_OK(ternjit_kernel_entry(kernel, &fn, &state));
      CHECK(fn != NULL);
      if (fn != NULL) {
        buffers[0] = x;
        buffers[1] = got_fn;
        CHECK(fn(state, buffers) == 0);
        snprintf(what, sizeof what, "%s kernel fn M=%lld", label, (long long)M);
        g_failures += bl_compare(what, M * N, got_fn, want, bound) != 0;
      }
    }
  }
  printf("  ok: %s: BitLinear.forward M=1..%d matches the C reference (run and kernel fn)\n", label, (int)MAX_M);
}

static void check_target(const char* target, const char* source, size_t len) {
  ternjit_engine_options opts;
  ternjit_engine* engine = NULL;
  ternjit_program* plain = NULL;
  ternjit_program* packed = NULL;
  bl_layer L = bl_layer_make(K, N, 7);
  char label[64];

  printf("target %s\n", target);
  ternjit_engine_options_init(&opts);
  opts.target = target;
  CHECK_OK(ternjit_engine_create(&opts, &engine));
  if (engine == NULL) {
    bl_layer_free(&L);
    return;
  }
  CHECK_OK(ternjit_compile(engine, source, len, "bitlinear.tri", &plain));
  CHECK_OK(ternjit_compile(engine, source, len, "bitlinear.tri", &packed));
  if (plain != NULL) {
    bind_layer(plain, &L, 0);
    snprintf(label, sizeof label, "%s plain", target);
    check_layer(plain, &L, label);
  }
  if (packed != NULL) {
    bind_layer(packed, &L, 1);
    snprintf(label, sizeof label, "%s tern2", target);
    check_layer(packed, &L, label);
  }
  ternjit_program_destroy(plain);
  ternjit_program_destroy(packed);
  ternjit_engine_destroy(engine);
  bl_layer_free(&L);
}

/* A retained kernel outlives its program and engine (ternjit_kernel_retain): its entry, state and
 * outputs stay valid and correct until the last ternjit_kernel_release. */
static void check_retained_kernel(const char* target, const char* source, size_t len) {
  ternjit_engine_options opts;
  ternjit_engine* engine = NULL;
  ternjit_program* p = NULL;
  ternjit_kernel* kernel = NULL;
  ternjit_kernel_fn fn = NULL;
  const void* state = NULL;
  bl_layer L = bl_layer_make(K, N, 9);
  const int64_t M = 3;
  const int64_t x_shape[2] = {M, K};
  float x[3 * K], want[3 * N], got[3 * N], again[3 * N];
  double bound[3 * N];
  ternjit_tensor in;
  void* buffers[2];
  char what[96];
  size_t i;

  ternjit_engine_options_init(&opts);
  opts.target = target;
  CHECK(ternjit_has_feature("kernel-retain") == 1);
  CHECK_OK(ternjit_engine_create(&opts, &engine));
  if (engine != NULL) CHECK_OK(ternjit_compile(engine, source, len, "bitlinear.tri", &p));
  if (p == NULL) {
    ternjit_engine_destroy(engine);
    bl_layer_free(&L);
    return;
  }
  bind_layer(p, &L, 0);
  bl_input(&L, M, 500, x);
  if (bl_reference(&L, M, x, want, bound) != 0) ++g_failures;
  in.data = NULL;
  in.dtype = TERNJIT_F32;
  in.rank = 2;
  in.shape = x_shape;
  CHECK_OK(ternjit_get_kernel(p, "BitLinear.forward", &in, 1, &kernel));
  if (kernel != NULL) {
    /* A release without a retain is refused (the program holds the kernel). */
    expect_error("kernel_release without retain", ternjit_kernel_release(kernel), TERNJIT_INVALID_ARGUMENT,
                 "holds no reference");
    CHECK_OK(ternjit_kernel_retain(kernel));
    CHECK_OK(ternjit_kernel_retain(kernel)); /* counted: two references */
    CHECK_OK(ternjit_kernel_entry(kernel, &fn, &state));
  }
  ternjit_program_destroy(p); /* the program first, then its engine */
  ternjit_engine_destroy(engine);
  if (kernel != NULL && fn != NULL) {
    for (i = 0; i < (size_t)(M * N); ++i) got[i] = again[i] = -1.0f;
    buffers[0] = x;
    buffers[1] = got;
    CHECK(fn(state, buffers) == 0);
    snprintf(what, sizeof what, "%s retained kernel after destroy", target);
    g_failures += bl_compare(what, M * N, got, want, bound) != 0;
    CHECK(ternjit_kernel_num_outputs(kernel) == 1);
    CHECK_OK(ternjit_kernel_release(kernel)); /* one reference left */
    buffers[1] = again;
    CHECK(fn(state, buffers) == 0);
    CHECK(memcmp(got, again, sizeof got) == 0);
    CHECK_OK(ternjit_kernel_release(kernel)); /* the last: the program's memory goes */
  }
  expect_error("kernel_retain(NULL)", ternjit_kernel_retain(NULL), TERNJIT_INVALID_ARGUMENT, "kernel is null");
  expect_error("kernel_release(NULL)", ternjit_kernel_release(NULL), TERNJIT_INVALID_ARGUMENT, "kernel is null");
  printf("  ok: %s: a retained kernel runs correctly after its program and engine are destroyed\n", target);
  bl_layer_free(&L);
}

/* Writes L as a safetensors file (gamma and w_scale F32, w I8 in {-1, 0, 1}). Returns 0 on
 * success. The header is padded with spaces to a multiple of 8 bytes. */
static int write_safetensors(const char* path, const bl_layer* L) {
  char header[512];
  const long g_end = (long)(4 * L->K), w_end = g_end + (long)(L->K * L->N), s_end = w_end + (long)(4 * L->N);
  int n = snprintf(header, sizeof header,
                   "{\"BitLinear.gamma\":{\"dtype\":\"F32\",\"shape\":[%lld],\"data_offsets\":[0,%ld]},"
                   "\"BitLinear.w\":{\"dtype\":\"I8\",\"shape\":[%lld,%lld],\"data_offsets\":[%ld,%ld]},"
                   "\"BitLinear.w_scale\":{\"dtype\":\"F32\",\"shape\":[%lld],\"data_offsets\":[%ld,%ld]}}",
                   (long long)L->K, g_end, (long long)L->K, (long long)L->N, g_end, w_end, (long long)L->N, w_end,
                   s_end);
  unsigned char len8[8];
  FILE* f;
  int i, ok;
  if (n < 0 || n + 8 >= (int)sizeof header) return 1;
  while (n % 8 != 0) header[n++] = ' ';
  for (i = 0; i < 8; ++i) len8[i] = (unsigned char)(((uint64_t)n >> (8 * i)) & 0xff);
  f = fopen(path, "wb");
  if (f == NULL) return 1;
  /* Floats are written in host order: safetensors is little-endian, as are the hosts here. */
  ok = fwrite(len8, 1, 8, f) == 8 && fwrite(header, 1, (size_t)n, f) == (size_t)n &&
       fwrite(L->gamma, 4, (size_t)L->K, f) == (size_t)L->K &&
       fwrite(L->w, 1, (size_t)(L->K * L->N), f) == (size_t)(L->K * L->N) &&
       fwrite(L->w_scale, 4, (size_t)L->N, f) == (size_t)L->N;
  return fclose(f) != 0 || !ok;
}

/* ternjit_engine_create_from_env (ctest sets TERNJIT_TARGET=reference and
 * TERNJIT_OPT_LEVEL=1), ternjit_bind_weights_file and ternjit_bind_random. */
static void check_env_file_random(const char* source, size_t len) {
  const char* tmpdir = getenv("TERNJIT_TEST_TMPDIR");
  char path[1024];
  ternjit_engine* engine = NULL;
  ternjit_program* from_file = NULL;
  ternjit_program* r1 = NULL;
  ternjit_program* r2 = NULL;
  bl_layer L = bl_layer_make(K, N, 21);

  printf("engine from the environment, weights from a file and from a seed\n");
  CHECK_OK(ternjit_engine_create_from_env(&engine));
  if (engine == NULL) {
    bl_layer_free(&L);
    return;
  }
  CHECK_OK(ternjit_compile(engine, source, len, "bitlinear.tri", &from_file));
  snprintf(path, sizeof path, "%s/%s.weights.safetensors", tmpdir != NULL ? tmpdir : ".", g_name);
  CHECK(write_safetensors(path, &L) == 0);
  if (from_file != NULL) {
    CHECK_OK(ternjit_bind_weights_file(from_file, path));
    check_layer(from_file, &L, "safetensors");
    ternjit_program_destroy(from_file);
  }
  remove(path);

  /* The same seed gives the same weights, so two programs agree exactly. */
  CHECK_OK(ternjit_compile(engine, source, len, "bitlinear.tri", &r1));
  CHECK_OK(ternjit_compile(engine, source, len, "bitlinear.tri", &r2));
  if (r1 != NULL && r2 != NULL) {
    float x[3 * K], y1[3 * N], y2[3 * N];
    const int64_t x_shape[2] = {3, K};
    const int64_t y_shape[2] = {3, N};
    const int64_t w_shape[2] = {K, N};
    ternjit_tensor in;
    ternjit_tensor out;
    int i, positive = 0;
    bl_input(&L, 3, 5, x);
    in.data = x;
    in.dtype = TERNJIT_F32;
    in.rank = 2;
    in.shape = x_shape;
    out.dtype = TERNJIT_F32;
    out.rank = 2;
    out.shape = y_shape;
    /* w fixes K and N; bind_random draws the still-unbound gamma and w_scale. */
    CHECK_OK(ternjit_bind_weight(r1, "BitLinear.w", L.w, TERNJIT_T2, TERNJIT_FORMAT_PLAIN, w_shape, 2));
    CHECK_OK(ternjit_bind_weight(r2, "BitLinear.w", L.w, TERNJIT_T2, TERNJIT_FORMAT_PLAIN, w_shape, 2));
    CHECK_OK(ternjit_bind_random(r1, 42));
    CHECK_OK(ternjit_bind_random(r2, 42));
    out.data = y1;
    CHECK_OK(ternjit_run(r1, "BitLinear.forward", &in, 1, &out, 1));
    out.data = y2;
    CHECK_OK(ternjit_run(r2, "BitLinear.forward", &in, 1, &out, 1));
    CHECK(memcmp(y1, y2, sizeof y1) == 0);
    for (i = 0; i < 3 * N; ++i) {
      CHECK(y1[i] >= 0.0f); /* relu, and not NaN */
      positive += y1[i] > 0.0f;
    }
    CHECK(positive > 0);
    printf("  ok: bind_random(42) twice gives identical outputs (%d of %d positive)\n", positive, 3 * N);
  }
  ternjit_program_destroy(r1);
  ternjit_program_destroy(r2);
  ternjit_engine_destroy(engine);
  bl_layer_free(&L);
}

static void check_errors(const char* source, size_t len) {
  static const char bad_source[] =
      "layer Bad {\n"
      "    fn forward(x: Tensor[M, K]) -> Tensor[M, K] {\n"
      "        return relu(undefined_name)\n"
      "    }\n"
      "}\n";
  ternjit_engine_options opts;
  ternjit_engine* engine = NULL;
  ternjit_engine* none = NULL;
  ternjit_program* p = NULL;
  ternjit_program* bad = NULL;
  ternjit_kernel* kernel = NULL;
  ternjit_kernel_fn fn = NULL;
  const void* state = NULL;
  bl_layer L = bl_layer_make(K, N, 3);
  float x[2 * K], y[2 * N];
  const int64_t x_shape[2] = {2, K};
  const int64_t x_bad[2] = {2, K - 1};
  const int64_t y_shape[2] = {2, N};
  const int64_t y_bad[2] = {3, N};
  const int64_t k_bad[1] = {K + 1};
  ternjit_tensor in;
  ternjit_tensor out;

  printf("error paths\n");
  bl_input(&L, 2, 1, x);
  ternjit_engine_options_init(&opts);
  opts.target = "reference";
  CHECK_OK(ternjit_engine_create(&opts, &engine));
  if (engine == NULL) {
    bl_layer_free(&L);
    return;
  }

  /* Null handles and pointers. */
  expect_error("engine_create(out=NULL)", ternjit_engine_create(&opts, NULL), TERNJIT_INVALID_ARGUMENT, "null");
  expect_error("compile(engine=NULL)", ternjit_compile(NULL, source, len, "x.tri", &p), TERNJIT_INVALID_ARGUMENT,
               "engine");
  CHECK(p == NULL);
  expect_error("compile(source=NULL)", ternjit_compile(engine, NULL, 5, "x.tri", &p), TERNJIT_INVALID_ARGUMENT,
               "source");
  expect_error("bind_weight(program=NULL)",
               ternjit_bind_weight(NULL, "BitLinear.gamma", L.gamma, TERNJIT_F32, TERNJIT_FORMAT_PLAIN, x_shape, 1),
               TERNJIT_INVALID_ARGUMENT, "program");
  expect_error("run(program=NULL)", ternjit_run(NULL, "BitLinear.forward", NULL, 0, NULL, 0),
               TERNJIT_INVALID_ARGUMENT, "program");
  expect_error("get_kernel(program=NULL)", ternjit_get_kernel(NULL, "BitLinear.forward", NULL, 0, &kernel),
               TERNJIT_INVALID_ARGUMENT, "program");
  expect_error("kernel_entry(kernel=NULL)", ternjit_kernel_entry(NULL, &fn, &state), TERNJIT_INVALID_ARGUMENT,
               "kernel");
  expect_error("kernel_output(kernel=NULL)", ternjit_kernel_output(NULL, 0, NULL, NULL, NULL),
               TERNJIT_INVALID_ARGUMENT, "kernel");
  CHECK(ternjit_kernel_num_outputs(NULL) == 0);
  expect_error("bind_random(program=NULL)", ternjit_bind_random(NULL, 1), TERNJIT_INVALID_ARGUMENT, "program");
  expect_error("bind_weights_file(program=NULL)", ternjit_bind_weights_file(NULL, "w.safetensors"),
               TERNJIT_INVALID_ARGUMENT, "program");
  ternjit_engine_destroy(NULL);   /* no-ops */
  ternjit_program_destroy(NULL);

  /* Bad options. */
  opts.target = "no-such-target";
  expect_error("engine_create(target=no-such-target)", ternjit_engine_create(&opts, &none), TERNJIT_NOT_FOUND,
               "no-such-target");
  CHECK(none == NULL);
  opts.target = "auto";
  opts.opt_level = 9;
  expect_error("engine_create(opt_level=9)", ternjit_engine_create(&opts, &none), TERNJIT_INVALID_ARGUMENT,
               "opt_level");
  opts.opt_level = 2;
  /* Target options: each target validates its own; a typo names the target and the option. */
  opts.target_options = "x86.max_iza=avx2";
  expect_error("engine_create(target_options typo)", ternjit_engine_create(&opts, &none), TERNJIT_INVALID_ARGUMENT,
               "unknown x86 option 'max_iza'");
  opts.target_options = "x86.max_isa=avx2;llvm.cpu=generic";
  opts.tuning = "sometimes";
  expect_error("engine_create(tuning=sometimes)", ternjit_engine_create(&opts, &none), TERNJIT_INVALID_ARGUMENT,
               "tuning");
  opts.tuning = "cached";
  {
    ternjit_engine* ok_engine = NULL;
    CHECK(ternjit_engine_create(&opts, &ok_engine) == TERNJIT_OK && ok_engine != NULL);
    ternjit_engine_destroy(ok_engine);
  }
  opts.target_options = NULL;
  opts.tuning = NULL;
  opts.struct_size = 4;
  expect_error("engine_create(struct_size=4)", ternjit_engine_create(&opts, &none), TERNJIT_INVALID_ARGUMENT,
               "struct_size");

  /* Bad source: a located diagnostic, file:line:col. */
  {
    ternjit_status st = ternjit_compile(engine, bad_source, sizeof bad_source - 1, "bad.tri", &bad);
    const char* msg = ternjit_last_error();
    const char* at = strstr(msg, "bad.tri:");
    unsigned line = 0, col = 0;
    expect_error("compile(bad source)", st, TERNJIT_INVALID_INPUT, "undefined_name");
    CHECK(bad == NULL);
    CHECK(at != NULL && sscanf(at, "bad.tri:%u:%u:", &line, &col) == 2 && line == 3 && col > 0);
    if (at == NULL || line != 3) fprintf(stderr, "  expected bad.tri:3:<col> in: %s\n", msg);
  }

  CHECK_OK(ternjit_compile(engine, source, len, "bitlinear.tri", &p));
  if (p != NULL) {
    in.data = x;
    in.dtype = TERNJIT_F32;
    in.rank = 2;
    in.shape = x_shape;
    out.data = y;
    out.dtype = TERNJIT_F32;
    out.rank = 2;
    out.shape = y_shape;

    /* Running before the weights are bound fails and names what is missing. */
    {
      const ternjit_status st = ternjit_run(p, "BitLinear.forward", &in, 1, &out, 1);
      CHECK(st != TERNJIT_OK);
      if (st != TERNJIT_OK) expect_error("run before binding weights", st, st, "BitLinear.");
    }

    /* Weights: unknown name, wrong shape, bad enum values. */
    expect_error("bind_weight(unknown parameter)",
                 ternjit_bind_weight(p, "BitLinear.nope", L.gamma, TERNJIT_F32, TERNJIT_FORMAT_PLAIN, k_bad, 1),
                 TERNJIT_NOT_FOUND, "nope");
    expect_error("bind_weight(wrong shape)",
                 ternjit_bind_weight(p, "BitLinear.gamma", x, TERNJIT_F32, TERNJIT_FORMAT_PLAIN, x_shape, 2),
                 TERNJIT_INVALID_INPUT, "gamma");
    expect_error("bind_weight(bad dtype)",
                 ternjit_bind_weight(p, "BitLinear.gamma", L.gamma, (ternjit_dtype)99, TERNJIT_FORMAT_PLAIN, k_bad,
                                     1),
                 TERNJIT_INVALID_ARGUMENT, "dtype");
    expect_error("bind_weight(bad format)",
                 ternjit_bind_weight(p, "BitLinear.w", L.w, TERNJIT_T2, (ternjit_format)42, x_shape, 2),
                 TERNJIT_INVALID_ARGUMENT, "format");
    expect_error("bind_weight(data=NULL)",
                 ternjit_bind_weight(p, "BitLinear.gamma", NULL, TERNJIT_F32, TERNJIT_FORMAT_PLAIN, k_bad, 1),
                 TERNJIT_INVALID_ARGUMENT, "null");
    {
      /* A 10-byte buffer bound as 64 x 16 tern2 (256 bytes): refused before reading. */
      static const unsigned char ten[10] = {0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55};
      static const int64_t w64x16[2] = {64, 16};
      static const char* rules[1] = {"model.{x}.weight={x}"};
      expect_error("bind_weight_sized(short buffer)",
                   ternjit_bind_weight_sized(p, "BitLinear.w", ten, sizeof ten, TERNJIT_U8, TERNJIT_FORMAT_TERN2,
                                             w64x16, 2),
                   TERNJIT_INVALID_ARGUMENT, "needs 256 bytes, the buffer has 10");
      expect_error("bind_weight_sized(data=NULL)",
                   ternjit_bind_weight_sized(p, "BitLinear.w", NULL, 256, TERNJIT_U8, TERNJIT_FORMAT_TERN2, w64x16, 2),
                   TERNJIT_INVALID_ARGUMENT, "null");
      expect_error("bind_weights_file_mapped(bad rule)",
                   ternjit_bind_weights_file_mapped(p, "/nonexistent/w.gguf", rules, 1), TERNJIT_NOT_FOUND,
                   "/nonexistent/w.gguf");
      expect_error("bind_weights_file_mapped(rules=NULL)", ternjit_bind_weights_file_mapped(p, "w", NULL, 1),
                   TERNJIT_INVALID_ARGUMENT, "rules");
      CHECK(ternjit_has_feature("gguf") == 1 && ternjit_has_feature("bind-sized") == 1);
    }
    expect_error("bind_weights_file(missing file)", ternjit_bind_weights_file(p, "/nonexistent/w.safetensors"),
                 TERNJIT_NOT_FOUND, "/nonexistent/w.safetensors");

    bind_layer(p, &L, 0);
    CHECK_OK(ternjit_run(p, "BitLinear.forward", &in, 1, &out, 1));

    /* Wrong shapes, wrong counts, unknown function. A caller buffer whose shape or dtype
     * does not fit is INVALID_INPUT ("shapes or values are wrong") or INVALID_ARGUMENT
     * (the buffers handed over are API misuse); either way the message names it. */
    in.shape = x_bad;
    expect_error2("run(x has the wrong K)", ternjit_run(p, "BitLinear.forward", &in, 1, &out, 1),
                  TERNJIT_INVALID_INPUT, TERNJIT_INVALID_ARGUMENT, "63");
    expect_error2("get_kernel(x has the wrong K)", ternjit_get_kernel(p, "BitLinear.forward", &in, 1, &kernel),
                  TERNJIT_INVALID_INPUT, TERNJIT_INVALID_ARGUMENT, "63");
    in.shape = x_shape;
    out.shape = y_bad;
    expect_error2("run(output has the wrong M)", ternjit_run(p, "BitLinear.forward", &in, 1, &out, 1),
                  TERNJIT_INVALID_INPUT, TERNJIT_INVALID_ARGUMENT, "output");
    out.shape = y_shape;
    in.dtype = TERNJIT_I32;
    expect_error2("run(x has the wrong dtype)", ternjit_run(p, "BitLinear.forward", &in, 1, &out, 1),
                  TERNJIT_INVALID_INPUT, TERNJIT_INVALID_ARGUMENT, "i32");
    in.dtype = TERNJIT_F32;
    expect_error("run(no inputs)", ternjit_run(p, "BitLinear.forward", &in, 0, &out, 1), TERNJIT_INVALID_ARGUMENT,
                 NULL);
    expect_error("run(inputs=NULL, n_inputs=1)", ternjit_run(p, "BitLinear.forward", NULL, 1, &out, 1),
                 TERNJIT_INVALID_ARGUMENT, "null");
    in.rank = -1;
    expect_error("run(rank -1)", ternjit_run(p, "BitLinear.forward", &in, 1, &out, 1), TERNJIT_INVALID_ARGUMENT,
                 "rank");
    in.rank = 2;
    expect_error("run(unknown function)", ternjit_run(p, "BitLinear.backward", &in, 1, &out, 1), TERNJIT_NOT_FOUND,
                 "BitLinear.backward");
    expect_error("get_kernel(unknown function)", ternjit_get_kernel(p, "Nope.forward", &in, 1, &kernel),
                 TERNJIT_NOT_FOUND, "Nope.forward");
    expect_error("run(function=NULL)", ternjit_run(p, NULL, &in, 1, &out, 1), TERNJIT_INVALID_ARGUMENT, "function");

    /* A success after failures works and clears the message (the last-error rule). */
    CHECK(strcmp(ternjit_last_error(), "") != 0);
    CHECK_OK(ternjit_run(p, "BitLinear.forward", &in, 1, &out, 1));
    CHECK(ternjit_last_error() != NULL && strcmp(ternjit_last_error(), "") == 0);
    ternjit_program_destroy(p);
  }
  ternjit_engine_destroy(engine);
  bl_layer_free(&L);
}

/* Counts the trace lines an engine hands to the options' trace callback. */
static void count_trace(void* context, const char* line, size_t len) {
  int* n = (int*)context;
  if (line != NULL && len > 0 && memchr(line, '\n', len) == NULL) ++*n;
}

/* Checks a declaration: name, dtype and dims, each "" for a static extent or a symbol name. */
static void check_decl(const char* what, const ternjit_tensor_decl* d, const char* name, ternjit_dtype dtype,
                       int32_t rank, const int64_t* extents, const char* const* symbols) {
  int32_t i;
  int ok = d->name != NULL && strcmp(d->name, name) == 0 && d->dtype == dtype && d->rank == rank;
  for (i = 0; ok && i < rank; ++i) {
    if (symbols[i] != NULL)
      ok = d->extents[i] == -1 && d->symbols[i] != NULL && strcmp(d->symbols[i], symbols[i]) == 0;
    else
      ok = d->extents[i] == extents[i] && d->symbols[i] == NULL;
  }
  if (!ok) {
    fprintf(stderr, "%s: declaration '%s' dtype %d rank %d does not match '%s'\n", what,
            d->name ? d->name : "(null)", (int)d->dtype, (int)d->rank, name);
    ++g_failures;
  }
}

/* Introspection of functions and parameters, the trace option, and the last-error rule on
 * the kernel entry (the reference target reports a null buffer). */
static void check_introspection(const char* source, size_t len) {
  static const char kFixed[] =
      "layer Fixed {\n"
      "    param w: TernaryTensor[8, N]\n"
      "    param b: Tensor[N]\n"
      "    fn forward(x: Tensor[M, 8]) -> Tensor[M, N] {\n"
      "        return (x @ w) + b\n"
      "    }\n"
      "}\n";
  ternjit_engine_options opts;
  ternjit_engine* engine = NULL;
  ternjit_program* p = NULL;
  ternjit_tensor_decl d;
  const char* name = NULL;
  size_t n_in = 99, n_out = 99;
  int32_t bound = -1;
  int traces = 0;
  static const char* const x_sym[] = {"M", "K"};
  static const char* const y_sym[] = {"M", "N"};
  static const char* const gamma_sym[] = {"K"};
  static const char* const w_sym[] = {"K", "N"};
  static const char* const fixed_x[] = {"M", NULL};
  static const int64_t fixed_x_ext[] = {-1, 8};
  static const char* const fixed_w[] = {NULL, "N"};
  static const int64_t fixed_w_ext[] = {8, -1};
  float gamma[K];
  int i;

  printf("introspection, trace and last error\n");
  ternjit_engine_options_init(&opts);
  opts.target = "reference";
  opts.cache_dir = "off";
  opts.verbose = 1;
  opts.trace = count_trace;
  opts.trace_context = &traces;
  CHECK_OK(ternjit_engine_create(&opts, &engine));
  if (engine == NULL) return;
  CHECK_OK(ternjit_compile(engine, source, len, "bitlinear.tri", &p));
  if (p == NULL) {
    ternjit_engine_destroy(engine);
    return;
  }
  CHECK(ternjit_program_num_functions(p) == 1);
  CHECK_OK(ternjit_program_function(p, 0, &name, &n_in, &n_out));
  CHECK(name != NULL && strcmp(name, "BitLinear.forward") == 0 && n_in == 1 && n_out == 1);
  CHECK_OK(ternjit_program_function_input(p, 0, 0, &d));
  check_decl("input 0", &d, "x", TERNJIT_F32, 2, NULL, x_sym);
  CHECK_OK(ternjit_program_function_output(p, 0, 0, &d));
  check_decl("output 0", &d, "", TERNJIT_F32, 2, NULL, y_sym);
  CHECK(ternjit_program_num_params(p) == 3);
  CHECK_OK(ternjit_program_param(p, 0, &d, &bound));
  check_decl("param 0", &d, "BitLinear.gamma", TERNJIT_F32, 1, NULL, gamma_sym);
  CHECK(bound == 0);
  CHECK_OK(ternjit_program_param(p, 1, &d, NULL));
  check_decl("param 1", &d, "BitLinear.w", TERNJIT_T2, 2, NULL, w_sym);
  for (i = 0; i < K; ++i) gamma[i] = 1.0f;
  {
    const int64_t gshape[1] = {K};
    CHECK_OK(ternjit_bind_weight(p, "BitLinear.gamma", gamma, TERNJIT_F32, TERNJIT_FORMAT_PLAIN, gshape, 1));
  }
  CHECK_OK(ternjit_program_param(p, 0, &d, &bound));
  CHECK(bound == 1);
  CHECK_OK(ternjit_program_param(p, 2, &d, &bound));
  CHECK(bound == 0 && strcmp(d.name, "BitLinear.w_scale") == 0);

  expect_error("program_function(index 1)", ternjit_program_function(p, 1, &name, NULL, NULL),
               TERNJIT_INVALID_ARGUMENT, "out of range");
  expect_error("program_function_input(argument 1)", ternjit_program_function_input(p, 0, 1, &d),
               TERNJIT_INVALID_ARGUMENT, "argument 1");
  expect_error("program_function_output(out NULL)", ternjit_program_function_output(p, 0, 0, NULL),
               TERNJIT_INVALID_ARGUMENT, "out is null");
  expect_error("program_param(3)", ternjit_program_param(p, 3, &d, NULL), TERNJIT_INVALID_ARGUMENT,
               "parameter 3");
  CHECK(ternjit_program_num_params(NULL) == 0 && strstr(ternjit_last_error(), "program is null") != NULL);
  CHECK(ternjit_program_num_functions(p) == 1 && strcmp(ternjit_last_error(), "") == 0);

  /* The kernel entry sets the message on failure and clears it on success. */
  {
    const int64_t sshape[1] = {N};
    float scale[N];
    for (i = 0; i < N; ++i) scale[i] = 0.5f;
    CHECK_OK(ternjit_bind_weight(p, "BitLinear.w_scale", scale, TERNJIT_F32, TERNJIT_FORMAT_PLAIN, sshape, 1));
  }
  CHECK_OK(ternjit_bind_random(p, 3)); /* binds w, the last unbound parameter */
  {
    const int64_t xs[2] = {2, K};
    float x[2 * K], y[2 * N];
    ternjit_tensor in = {NULL, TERNJIT_F32, 2, xs};
    ternjit_kernel* kernel = NULL;
    ternjit_kernel_fn fn = NULL;
    const void* state = NULL;
    void* buffers[2];
    int32_t st;
    for (i = 0; i < 2 * K; ++i) x[i] = (float)(i % 7) - 3.0f;
    CHECK_OK(ternjit_get_kernel(p, "BitLinear.forward", &in, 1, &kernel));
    CHECK(traces > 0); /* verbose lines went to the callback */
    if (kernel != NULL) {
      CHECK_OK(ternjit_kernel_entry(kernel, &fn, &state));
      ternjit_program* bad = NULL; /* not &p: a failed compile stores NULL there, and p is still in use */
      expect_error("compile(syntax error) before a kernel call", ternjit_compile(engine, "layer {", 7, "e.tri", &bad),
                   TERNJIT_INVALID_INPUT, "e.tri");
      CHECK(bad == NULL);
      buffers[0] = NULL;
      buffers[1] = y;
      st = fn(state, (void* const*)buffers);
      expect_error("kernel entry(null input)", (ternjit_status)st, TERNJIT_INVALID_ARGUMENT, "input 0 is null");
      CHECK(strstr(ternjit_last_error(), "e.tri") == NULL); /* not the previous, unrelated message */
      buffers[0] = x;
      CHECK(fn(state, (void* const*)buffers) == 0);
      CHECK(strcmp(ternjit_last_error(), "") == 0);
    }
  }
  ternjit_program_destroy(p);

  /* Static dims and an unnamed result in a second program. */
  p = NULL;
  CHECK_OK(ternjit_compile(engine, kFixed, sizeof kFixed - 1, "fixed.tri", &p));
  if (p != NULL) {
    CHECK_OK(ternjit_program_function_input(p, 0, 0, &d));
    check_decl("fixed input 0", &d, "x", TERNJIT_F32, 2, fixed_x_ext, fixed_x);
    CHECK_OK(ternjit_program_param(p, 0, &d, &bound));
    check_decl("fixed param w", &d, "Fixed.w", TERNJIT_T2, 2, fixed_w_ext, fixed_w);
    ternjit_program_destroy(p);
  }
  ternjit_engine_destroy(engine);

  /* options_init(NULL) is the one void function that can fail: it says so. */
  ternjit_engine_options_init(NULL);
  CHECK(strstr(ternjit_last_error(), "options is null") != NULL);
  ternjit_engine_options_init(&opts);
  CHECK(strcmp(ternjit_last_error(), "") == 0);

  /* The struct-size rule: a caller with the first struct (up to `verbose`) gets only its part
   * written, and an engine made from it works. */
  {
    const size_t first = offsetof(ternjit_engine_options, max_isa);
    const unsigned char* bytes = (const unsigned char*)&opts;
    memset(&opts, 0xAB, sizeof opts);
    ternjit_engine_options_init_sized(&opts, first);
    CHECK(opts.struct_size == first && opts.opt_level == 2 && strcmp(opts.target, "auto") == 0);
    CHECK(bytes[first] == 0xAB && bytes[sizeof opts - 1] == 0xAB);
    opts.target = "reference";
    opts.cache_dir = "off";
    engine = NULL;
    CHECK_OK(ternjit_engine_create(&opts, &engine));
    ternjit_engine_destroy(engine);
    ternjit_engine_options_init_sized(&opts, 4);
    CHECK(strstr(ternjit_last_error(), "below the first struct") != NULL);
  }
}

/* ternjit_compile_grad: y = x * w (elementwise) has dx = dy * w and dw = dy * x, exactly. */
static void check_grad(void) {
  static const char src[] = "layer P {\n    fn forward(x: Tensor[4], w: Tensor[4]) -> Tensor[4] {\n"
                            "        return x * w\n    }\n}\n";
  const char* wrt[2] = {"w", "x"};
  const char* bad_wrt[1] = {"nope"};
  ternjit_engine_options o;
  ternjit_engine* e = NULL;
  ternjit_program* p = NULL;
  float x[4] = {1.0f, -2.0f, 0.5f, 3.0f}, w[4] = {0.25f, 4.0f, -1.0f, 2.0f}, dy[4] = {2.0f, -1.0f, 8.0f, 0.5f};
  float y[4], dw[4], dx[4];
  const int64_t shape[1] = {4};
  ternjit_tensor in[3], out[2];
  int i;
  CHECK(ternjit_has_feature("autodiff") == 1);
  CHECK(strstr(ternjit_feature_names(), "autodiff,") != NULL);
  CHECK(strstr(ternjit_feature_names(), ",target:reference") != NULL);
  ternjit_engine_options_init(&o);
  o.target = "reference";
  o.cache_dir = "off";
  CHECK_OK(ternjit_engine_create(&o, &e));
  if (e == NULL) return;
  CHECK_OK(ternjit_compile_grad(e, src, strlen(src), "p.tri", "P.forward", wrt, 2, 0, &p));
  if (p != NULL) {
    in[0] = (ternjit_tensor){x, TERNJIT_F32, 1, shape};
    in[1] = (ternjit_tensor){w, TERNJIT_F32, 1, shape};
    in[2] = (ternjit_tensor){dy, TERNJIT_F32, 1, shape};
    out[0] = (ternjit_tensor){y, TERNJIT_F32, 1, shape};
    CHECK_OK(ternjit_run(p, "P.forward.fwd", in, 2, out, 1)); /* nothing saved: one result */
    out[0] = (ternjit_tensor){dw, TERNJIT_F32, 1, shape};
    out[1] = (ternjit_tensor){dx, TERNJIT_F32, 1, shape};
    CHECK_OK(ternjit_run(p, "P.forward.bwd", in, 3, out, 2));
    for (i = 0; i < 4; ++i) {
      CHECK(y[i] == x[i] * w[i]);
      CHECK(dw[i] == dy[i] * x[i]);
      CHECK(dx[i] == dy[i] * w[i]);
    }
    ternjit_program_destroy(p);
  }
  /* Every flag is accepted (no ternary matmul here: int8_dx and int8_dw change nothing, exactly). */
  CHECK(ternjit_has_feature("autodiff-int8-dx") == 1);
  CHECK(ternjit_has_feature("autodiff-int8-dw") == 1);
  p = NULL;
  CHECK_OK(ternjit_compile_grad(e, src, strlen(src), "p.tri", "P.forward", wrt, 2,
                                TERNJIT_GRAD_STE_CLIP | TERNJIT_GRAD_INT8_DX | TERNJIT_GRAD_INT8_DW, &p));
  if (p != NULL) {
    CHECK_OK(ternjit_run(p, "P.forward.bwd", in, 3, out, 2));
    for (i = 0; i < 4; ++i) CHECK(dw[i] == dy[i] * x[i] && dx[i] == dy[i] * w[i]);
    ternjit_program_destroy(p);
  }
  p = NULL;
  expect_error("compile_grad unknown function", ternjit_compile_grad(e, src, strlen(src), NULL, "P.nope", NULL, 0, 0, &p),
               TERNJIT_NOT_FOUND, "P.nope");
  expect_error("compile_grad unknown wrt", ternjit_compile_grad(e, src, strlen(src), NULL, "P.forward", bad_wrt, 1, 0, &p),
               TERNJIT_INVALID_INPUT, "nope");
  expect_error("compile_grad null function", ternjit_compile_grad(e, src, strlen(src), NULL, NULL, NULL, 0, 0, &p),
               TERNJIT_INVALID_ARGUMENT, "function is null");
  expect_error("compile_grad bad flags", ternjit_compile_grad(e, src, strlen(src), NULL, "P.forward", NULL, 0, 8u, &p),
               TERNJIT_INVALID_ARGUMENT, "flags");
  CHECK(p == NULL);
  ternjit_engine_destroy(e);
}

int main(int argc, char** argv) {
  static const char* default_targets[] = {"reference", "auto"};
  const char* const* targets = default_targets;
  int n_targets = 2, i;
  size_t len = 0;
  char* source;

  if (argc < 2) {
    fprintf(stderr, "usage: %s BITLINEAR_TRI [TARGET...]\n", argv[0]);
    return 2;
  }
  if (argc > 2) {
    targets = (const char* const*)(argv + 2);
    n_targets = argc - 2;
  }
  g_name = strrchr(argv[0], '/') != NULL ? strrchr(argv[0], '/') + 1 : argv[0];
  source = read_file(argv[1], &len);
  if (source == NULL) {
    fprintf(stderr, "cannot read %s\n", argv[1]);
    return 2;
  }

  /* Version and features. */
  CHECK(ternjit_abi_version() == TERNJIT_ABI_VERSION);
  CHECK(ternjit_version() != NULL && strlen(ternjit_version()) > 0);
  CHECK(ternjit_has_feature("target:reference") == 1);
  CHECK(ternjit_has_feature("safetensors") == 1);
  CHECK(ternjit_has_feature("format:tern2") == 1);
  CHECK(ternjit_has_feature("target:no-such-target") == 0);
  CHECK(ternjit_has_feature("no-such-feature") == 0);
  CHECK(ternjit_has_feature(NULL) == 0);
  CHECK(strcmp(ternjit_last_error(), "") != 0); /* has_feature(NULL) recorded a message */
  printf("ternjit %s, ABI %u, target:x86 %d, target:cuda %d\n", ternjit_version(), (unsigned)ternjit_abi_version(),
         ternjit_has_feature("target:x86"), ternjit_has_feature("target:cuda"));

  for (i = 0; i < n_targets; ++i) check_target(targets[i], source, len);
  for (i = 0; i < n_targets; ++i) check_retained_kernel(targets[i], source, len);
  check_env_file_random(source, len);
  check_errors(source, len);
  check_introspection(source, len);
  check_grad();
  free(source);

  if (g_failures != 0) {
    fprintf(stderr, "c_api_test: %d check(s) failed\n", g_failures);
    return 1;
  }
  printf("c_api_test: all checks passed\n");
  return 0;
}
