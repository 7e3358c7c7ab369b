/*
 * causewayd configuration commands: --check, --dump, --explain.
 * Each returns the process exit status: 0 success, 1 (explain only) no
 * route, 2 invalid configuration or usage.
 */
#ifndef CW_GATEWAY_CLI_CONFIG_H
#define CW_GATEWAY_CLI_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/**
 * Validate one or more gateway configs.  With several, also check them as
 * one system (routing loops, unreachable next hops, missing return routes).
 * @param[in] paths   files; @p n >= 1.
 * @param[in] client  load as client routes files (routes section only).
 * @param[in] probe   also open each network's plugin and protocol as the
 *                    gateway would (on port 0: nothing is taken from a
 *                    running gateway); gateway configs only.
 * @param[out] out    "FILE: ok" lines; @p err receives the errors.
 */
int cw_cli_check(const char *const *paths, size_t n, bool client, bool probe,
                 FILE *out, FILE *err);

/** Print the normalized config (every default filled in) as YAML. */
int cw_cli_dump(const char *path, bool client, FILE *out, FILE *err);

/** Print which route would carry a message to @p addr, and why. */
int cw_cli_explain(const char *path, bool client, const char *addr, FILE *out,
                   FILE *err);

#endif /* CW_GATEWAY_CLI_CONFIG_H */
