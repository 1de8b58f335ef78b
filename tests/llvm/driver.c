/* SPDX-License-Identifier: Apache-2.0 */
/* driver.c - runs one ternjit AOT entry: reads its inputs from a file, writes its outputs to another.
 * Built with -include <kernel>.h -DTJ_SYM=<symbol>; usage: driver IN_FILE OUT_FILE. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TJ_CAT(a, b) a##b
#define TJ_XCAT(a, b) TJ_CAT(a, b)

int main(int argc, char** argv) {
  static const unsigned long bytes[] = TJ_XCAT(TJ_SYM, _BUFFER_BYTES);
  enum { n = TJ_XCAT(TJ_SYM, _NUM_BUFFERS), n_in = TJ_XCAT(TJ_SYM, _NUM_INPUTS) };
  void* buffers[n];
  if (argc != 3) return 2;
  FILE* in = fopen(argv[1], "rb");
  FILE* out = fopen(argv[2], "wb");
  if (!in || !out) return 3;
  for (int i = 0; i < n; ++i) {
    buffers[i] = aligned_alloc(64, (bytes[i] + 64) / 64 * 64);
    memset(buffers[i], 0x5A, bytes[i]); /* poison the outputs */
    if (i < n_in && fread(buffers[i], 1, bytes[i], in) != bytes[i]) return 4;
  }
  void* scratch = aligned_alloc(64, (TJ_XCAT(TJ_SYM, _SCRATCH_BYTES) + 63) / 64 * 64);
  if (TJ_SYM(buffers, scratch) != 0) return 6; /* a run-time error (its record at _ERROR_OFFSET) */
  for (int i = n_in; i < n; ++i)
    if (fwrite(buffers[i], 1, bytes[i], out) != bytes[i]) return 5;
  fclose(in);
  fclose(out);
  return 0;
}
