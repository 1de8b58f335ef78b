/* SPDX-License-Identifier: Apache-2.0 */
/* tsan_test.c - 8 threads compile and run BitLinear through the C ABI at once (TSan checks it). */
/*
 * Usage: tsan_test BITLINEAR_TRI [TARGET]   (TARGET defaults to "auto")
 *
 * One engine and one program (K=64, N=32) are shared by 8 threads that start together
 * at barriers and:
 *   1. run the same shape (M=4) at once: concurrent first calls, one specialization;
 *   2. run a different shape each (M = 1 + thread), through ternjit_run and through the
 *      fetched kernel's function pointer, and the shared M=4 kernel's pointer at once;
 *   3. compile their own program from source on the shared engine, bind other weights
 *      (K=32, N=16) and run them; even threads also make an engine of their own;
 *   4. make a failing call naming their own thread and check that ternjit_last_error()
 *      is their own message (thread-local) while the others fail too.
 * Every result is compared with bitlinear_ref.h. Races are TSan's to report (it exits
 * non-zero); this program exits 1 on a wrong result or a failed call.
 */
#define _POSIX_C_SOURCE 200809L /* pthread_barrier_t under strict C11 */

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../c/bitlinear_ref.h"
#include "ternjit/ternjit.h"

enum { THREADS = 8, K1 = 64, N1 = 32, K2 = 32, N2 = 16, MAX_M = THREADS + 1, ROUNDS = 3 };

static void pthread_parallel_for(void* pool, void (*task)(void*, int64_t), void* context, int64_t n);

typedef struct shared_state {
  const char* source;
  size_t len;
  const char* target;
  ternjit_engine* engine;
  ternjit_program* program; /* K1 x N1 */
  bl_layer L1, L2;
  pthread_barrier_t barrier;
} shared_state;

typedef struct thread_arg {
  shared_state* s;
  int id;
  int failures;
} thread_arg;

static void fail_call(thread_arg* a, const char* what, ternjit_status st) {
  fprintf(stderr, "thread %d: %s returned %d: %s\n", a->id, what, (int)st, ternjit_last_error());
  ++a->failures;
}

/* Runs `p` (layer L) on M rows through ternjit_run, or the kernel fn when `via_fn`. */
static void run_and_check(thread_arg* a, ternjit_program* p, const bl_layer* L, int64_t M, int via_fn,
                          const char* label) {
  float x[MAX_M * K1], want[MAX_M * N1], got[MAX_M * N1];
  double bound[MAX_M * N1];
  const int64_t x_shape[2] = {M, L->K};
  const int64_t y_shape[2] = {M, L->N};
  ternjit_tensor in;
  ternjit_tensor out;
  ternjit_status st;
  char what[96];

  bl_input(L, M, (uint64_t)(1000 * a->id + M), x);
  if (bl_reference(L, M, x, want, bound) != 0) {
    ++a->failures;
    return;
  }
  memset(got, 0xff, sizeof got); /* NaN */
  in.data = x;
  in.dtype = TERNJIT_F32;
  in.rank = 2;
  in.shape = x_shape;
  out.data = got;
  out.dtype = TERNJIT_F32;
  out.rank = 2;
  out.shape = y_shape;
  if (!via_fn) {
    st = ternjit_run(p, "BitLinear.forward", &in, 1, &out, 1);
    if (st != TERNJIT_OK) {
      fail_call(a, "ternjit_run", st);
      return;
    }
  } else {
    ternjit_kernel* k = NULL;
    ternjit_kernel_fn fn = NULL;
    const void* state = NULL;
    void* buffers[2];
    st = ternjit_get_kernel(p, "BitLinear.forward", &in, 1, &k);
    if (st != TERNJIT_OK) {
      fail_call(a, "ternjit_get_kernel", st);
      return;
    }
    st = ternjit_kernel_entry(k, &fn, &state);
    if (st != TERNJIT_OK) {
      fail_call(a, "ternjit_kernel_entry", st);
      return;
    }
    buffers[0] = x;
    buffers[1] = got;
    st = (ternjit_status)fn(state, buffers);
    if (st != TERNJIT_OK) {
      fail_call(a, "kernel fn", st);
      return;
    }
  }
  snprintf(what, sizeof what, "thread %d %s M=%lld", a->id, label, (long long)M);
  a->failures += bl_compare(what, M * L->N, got, want, bound) != 0;
}

static void bind_layer(thread_arg* a, ternjit_program* p, const bl_layer* L) {
  const int64_t k_shape[1] = {L->K};
  const int64_t n_shape[1] = {L->N};
  const int64_t w_shape[2] = {L->K, L->N};
  ternjit_status st;
  if ((st = ternjit_bind_weight(p, "BitLinear.gamma", L->gamma, TERNJIT_F32, TERNJIT_FORMAT_PLAIN, k_shape, 1)))
    fail_call(a, "bind gamma", st);
  if ((st = ternjit_bind_weight(p, "BitLinear.w_scale", L->w_scale, TERNJIT_F32, TERNJIT_FORMAT_PLAIN, n_shape, 1)))
    fail_call(a, "bind w_scale", st);
  if ((st = ternjit_bind_weight(p, "BitLinear.w", L->w, TERNJIT_T2, TERNJIT_FORMAT_PLAIN, w_shape, 2)))
    fail_call(a, "bind w", st);
}

/* Compiles the layer on `engine`, binds L and runs M = 1 + id % 3. */
static void own_program(thread_arg* a, ternjit_engine* engine, const bl_layer* L, const char* label) {
  ternjit_program* p = NULL;
  ternjit_status st = ternjit_compile(engine, a->s->source, a->s->len, "bitlinear.tri", &p);
  if (st != TERNJIT_OK) {
    fail_call(a, "ternjit_compile", st);
    return;
  }
  bind_layer(a, p, L);
  run_and_check(a, p, L, 1 + a->id % 3, 0, label);
  run_and_check(a, p, L, 1 + a->id % 3, 1, label);
  ternjit_program_destroy(p);
}

static void* worker(void* arg) {
  thread_arg* a = (thread_arg*)arg;
  shared_state* s = a->s;
  int round;

  for (round = 0; round < ROUNDS; ++round) {
    /* 1. Everybody, the same shape, at once. */
    pthread_barrier_wait(&s->barrier);
    run_and_check(a, s->program, &s->L1, 4, round % 2, "same shape");
    /* 2. A shape of one's own (a new one each round), and the shared M=4 kernel's fn. */
    pthread_barrier_wait(&s->barrier);
    run_and_check(a, s->program, &s->L1, 1 + (a->id + round) % THREADS, round % 2, "own shape");
    run_and_check(a, s->program, &s->L1, 4, 1, "shared kernel fn");
  }

  /* 3. Compiling on the shared engine at once; even threads also on an engine of their own. */
  pthread_barrier_wait(&s->barrier);
  own_program(a, s->engine, &s->L2, "own program");
  if (a->id % 2 == 0) {
    ternjit_engine_options opts;
    ternjit_engine* mine = NULL;
    ternjit_status st;
    ternjit_engine_options_init(&opts);
    opts.target = s->target;
    opts.threads = 2;
    opts.parallel_for = pthread_parallel_for;
    st = ternjit_engine_create(&opts, &mine);
    if (st != TERNJIT_OK) {
      fail_call(a, "ternjit_engine_create", st);
    } else {
      own_program(a, mine, &s->L1, "own engine");
      ternjit_engine_destroy(mine);
    }
  }

  /* 4. Failing at once: each thread must read its own message. */
  pthread_barrier_wait(&s->barrier);
  {
    char fn_name[32];
    const int64_t shape[2] = {1, K1};
    ternjit_tensor in;
    ternjit_kernel* k = NULL;
    ternjit_status st;
    snprintf(fn_name, sizeof fn_name, "Thread%d.forward", a->id);
    in.data = NULL;
    in.dtype = TERNJIT_F32;
    in.rank = 2;
    in.shape = shape;
    st = ternjit_get_kernel(s->program, fn_name, &in, 1, &k);
    pthread_barrier_wait(&s->barrier); /* everybody has failed before anybody reads */
    if (st != TERNJIT_NOT_FOUND || strstr(ternjit_last_error(), fn_name) == NULL) {
      fprintf(stderr, "thread %d: expected NOT_FOUND naming %s, got %d: %s\n", a->id, fn_name, (int)st,
              ternjit_last_error());
      ++a->failures;
    }
  }
  return NULL;
}

/* The kernels' thread pool during this test: plain pthreads, one per task, so TSan
 * sees every synchronization. (Debian's libtbb is not built with TSan: the engine's
 * default oneTBB pool would show its internal hand-offs as races.) */
typedef struct {
  void (*task)(void*, int64_t);
  void* context;
  int64_t i;
} pool_job;

static void* pool_thread(void* p) {
  pool_job* j = (pool_job*)p;
  j->task(j->context, j->i);
  return NULL;
}

static void pthread_parallel_for(void* pool, void (*task)(void*, int64_t), void* context, int64_t n) {
  pthread_t t[16];
  pool_job jobs[16];
  int64_t i, started = 0;
  (void)pool;
  for (i = 1; i < n && i < 16; ++i) {
    jobs[i].task = task;
    jobs[i].context = context;
    jobs[i].i = i;
    if (pthread_create(&t[i], NULL, pool_thread, &jobs[i]) != 0) break;
    started = i;
  }
  task(context, 0);
  for (i = started + 1; i < n; ++i) task(context, i); /* what could not get a thread */
  for (i = 1; i <= started; ++i) pthread_join(t[i], NULL);
}

int main(int argc, char** argv) {
  shared_state s;
  thread_arg args[THREADS];
  pthread_t threads[THREADS];
  ternjit_engine_options opts;
  ternjit_status st;
  int i, failures = 0;
  thread_arg main_arg;

  if (argc < 2) {
    fprintf(stderr, "usage: %s BITLINEAR_TRI [TARGET]\n", argv[0]);
    return 2;
  }
  memset(&s, 0, sizeof s);
  memset(&main_arg, 0, sizeof main_arg);
  main_arg.s = &s;
  main_arg.id = -1;
  s.target = argc > 2 ? argv[2] : "auto";
  s.source = read_file(argv[1], &s.len);
  if (s.source == NULL) {
    fprintf(stderr, "cannot read %s\n", argv[1]);
    return 2;
  }
  s.L1 = bl_layer_make(K1, N1, 11);
  s.L2 = bl_layer_make(K2, N2, 12);
  ternjit_engine_options_init(&opts);
  opts.target = s.target;
  opts.threads = 2;
  opts.parallel_for = pthread_parallel_for;
  if ((st = ternjit_engine_create(&opts, &s.engine)) != TERNJIT_OK) {
    fail_call(&main_arg, "ternjit_engine_create", st);
    return 1;
  }
  if ((st = ternjit_compile(s.engine, s.source, s.len, "bitlinear.tri", &s.program)) != TERNJIT_OK) {
    fail_call(&main_arg, "ternjit_compile", st);
    return 1;
  }
  bind_layer(&main_arg, s.program, &s.L1);
  pthread_barrier_init(&s.barrier, NULL, THREADS);

  for (i = 0; i < THREADS; ++i) {
    args[i].s = &s;
    args[i].id = i;
    args[i].failures = 0;
    if (pthread_create(&threads[i], NULL, worker, &args[i]) != 0) {
      fprintf(stderr, "pthread_create failed\n");
      return 1;
    }
  }
  for (i = 0; i < THREADS; ++i) {
    pthread_join(threads[i], NULL);
    failures += args[i].failures;
  }
  failures += main_arg.failures;

  pthread_barrier_destroy(&s.barrier);
  ternjit_program_destroy(s.program);
  ternjit_engine_destroy(s.engine);
  bl_layer_free(&s.L1);
  bl_layer_free(&s.L2);
  free((void*)s.source);

  if (failures != 0) {
    fprintf(stderr, "tsan_test: %d failure(s)\n", failures);
    return 1;
  }
  printf("tsan_test: %d threads x %d rounds on target %s: all results match\n", THREADS, ROUNDS, s.target);
  return 0;
}
