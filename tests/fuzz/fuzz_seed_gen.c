/*
 * Write the seed corpus of the bootstrap parsers into a directory:
 *
 *   fuzz_seed_gen DIR
 *
 * One file per seed, named after what it holds.  Made by the encoders at
 * build time, so no binary corpus is kept in the repository.
 */
#include <stdio.h>

#include "fuzz_messages.h"

static int failures;

static void write_seed(const char *name, const uint8_t *bytes, size_t size,
                       void *ctx) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", (const char *)ctx, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(bytes, 1, size, f) != size) {
    perror(path);
    failures++;
  }
  if (f) fclose(f);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  int n = fuzz_messages_seeds(write_seed, argv[1]);
  printf("wrote %d seeds to %s\n", n, argv[1]);
  return failures ? 1 : 0;
}
