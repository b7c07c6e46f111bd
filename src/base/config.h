/*
 * The one table of QCOLL_* environment variables.  Every variable qcoll
 * reads is listed in config.c with its default and a one-line doc, so
 * qcoll-info can print them all.  Values are read from the environment
 * when asked (cheap getenv), and communicators read the ones they need
 * once at init.
 */
#ifndef QCOLL_CORE_CONFIG_H
#define QCOLL_CORE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The raw value of a listed variable: the environment's, else the table's
 * default (never NULL for listed names; NULL for unlisted ones). */
const char *qcoll__env_str(const char *name);
/* Parsed forms; an unparsable value logs a warning and gives the default. */
long long qcoll__env_int(const char *name);
double qcoll__env_double(const char *name);
/* Byte sizes accept suffixes K, M, G (powers of 1024). */
size_t qcoll__env_bytes(const char *name);
bool qcoll__env_bool(const char *name);

/* Parse "123", "4K", "16M", "1G" into bytes; false when malformed. */
bool qcoll__parse_bytes(const char *s, size_t *out);

#ifdef __cplusplus
}
#endif

#endif
