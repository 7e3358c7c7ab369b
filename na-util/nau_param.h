/*
 * na-util: plugin parameters, the key/value pairs given to cw_na_open()
 * (params[0] = key, params[1] = value, ..., NULL) with their environment
 * fallbacks.  Parsing only: the plugin logs what it rejects, in its words.
 */
#ifndef NAU_PARAM_H
#define NAU_PARAM_H

#include <stdint.h>

#include <causeway/status.h>

/** The value of @p key: the last one in @p params (may be NULL), else
 *  getenv(@p env) when @p env is not NULL, else NULL. */
const char *nau_param(const char *const *params, const char *key,
                      const char *env);

/**
 * Parse @p s as a decimal integer in [@p min, @p max] into *@p v_p (written
 * only on success).
 * @return CW_OK; CW_INVALID_ARG for NULL, no number, a sign, trailing
 *         characters or a value out of range.
 */
cw_status_t nau_param_uint(const char *s, uint64_t min, uint64_t max,
                           uint64_t *v_p);

#endif /* NAU_PARAM_H */
