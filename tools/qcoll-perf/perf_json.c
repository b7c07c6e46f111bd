/*
 * qcoll-perf's JSON results (perf_json.h).
 */
#include "perf_json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void put_string(FILE *f, const char *s) {
  if (!s) {
    fputs("null", f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

/* JSON has no NaN or infinity: such a number is written as null. */
static void put_number(FILE *f, double x) {
  if (isfinite(x))
    fprintf(f, "%.9g", x);
  else
    fputs("null", f);
}

static void put_result(FILE *f, const perf_json_result_t *r, bool nccl) {
  if (!r->present) {
    fputs("null", f);
    return;
  }
  fputs("{\"time_us\": ", f);
  if (r->untimed) {
    fputs("null, \"untimed\": ", f);
    put_string(f, r->untimed);
  } else {
    put_number(f, r->sec * 1e6);
    if (!nccl) {
      fputs(", \"algbw\": ", f);
      put_number(f, r->algbw);
    }
    fputs(", \"busbw\": ", f);
    put_number(f, r->busbw);
  }
  if (nccl) {
    fputs(", \"ratio\": ", f);
    if (r->ratio > 0)
      put_number(f, r->ratio);
    else
      fputs("null", f);
  } else {
    fputs(", \"wrong\": ", f);
    if (r->checked)
      fprintf(f, "%lld", (long long)r->wrong);
    else
      fputs("null", f);
  }
  fputc('}', f);
}

int perf_json_open(perf_json_t *j, const char *path, const perf_json_run_t *run) {
  memset(j, 0, sizeof *j);
  size_t n = strlen(path);
  j->path = strdup(path);
  j->tmp_path = malloc(n + 5);
  if (!j->path || !j->tmp_path) {
    free(j->path);
    free(j->tmp_path);
    errno = ENOMEM;
    return -1;
  }
  memcpy(j->tmp_path, path, n);
  memcpy(j->tmp_path + n, ".tmp", 5);
  j->f = fopen(j->tmp_path, "w");
  if (!j->f) {
    int e = errno;
    free(j->path);
    free(j->tmp_path);
    errno = e;
    return -1;
  }
  FILE *f = j->f;
  const struct {
    const char *key, *value;
  } strings[] = {{"tool", "qcoll-perf"},        {"version", run->version},
                 {"library", run->library},     {"collective", run->collective},
                 {"memory", run->memory},       {"algo", run->algo},
                 {"quant", run->quant},         {"average", run->average},
                 {"nccl", run->nccl}};
  const struct {
    const char *key;
    int value;
  } ints[] = {{"nranks", run->nranks},
              {"iters", run->iters},
              {"warmup_iters", run->warmup_iters},
              {"agg_iters", run->agg_iters},
              {"rounds", run->rounds},
              {"graph_launches", run->graph_launches},
              {"registered", run->registered},
              {"check", run->check}};
  fputc('{', f);
  for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
    fprintf(f, "%s\"%s\": ", i ? ", " : "", strings[i].key);
    put_string(f, strings[i].value);
  }
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
    fprintf(f, ", \"%s\": %d", ints[i].key, ints[i].value);
  fputs(",\n \"rows\": [", f);
  return 0;
}

void perf_json_row(perf_json_t *j, const perf_json_row_t *row) {
  FILE *f = j->f;
  fprintf(f, "%s\n  {\"size\": %zu, \"count\": %zu, \"type\": ", j->rows ? "," : "",
          row->size, row->count);
  put_string(f, row->type);
  fputs(", \"redop\": ", f);
  put_string(f, row->redop);
  fprintf(f, ", \"root\": %d,\n   \"out_of_place\": ", row->root);
  put_result(f, &row->out_of_place, false);
  fputs(",\n   \"in_place\": ", f);
  put_result(f, &row->in_place, false);
  fputs(",\n   \"nccl\": ", f);
  put_result(f, &row->nccl, true);
  fputc('}', f);
  j->rows++;
}

int perf_json_close(perf_json_t *j, int64_t wrong, double avg_busbw) {
  FILE *f = j->f;
  fprintf(f, "],\n \"wrong\": %lld, \"avg_busbw\": ", (long long)wrong);
  put_number(f, avg_busbw);
  fputs("}\n", f);
  int st = ferror(f) ? -1 : 0;
  if (fclose(f) != 0) st = -1;
  if (st == 0 && rename(j->tmp_path, j->path) != 0) st = -1;
  int e = errno;
  free(j->path);
  free(j->tmp_path);
  memset(j, 0, sizeof *j);
  errno = e;
  return st;
}
