#ifndef KV_H
#define KV_H
#include <stddef.h>

/* A tiny string key/value store. Public API: everything named kv_*. */
typedef struct kv kv_t;

kv_t *kv_new(void);
void kv_free(kv_t *kv);
/* Stores a copy of key and value; an existing key's value is replaced. 0 on success, -1 on error. */
int kv_put(kv_t *kv, const char *key, const char *value);
/* The value of key, or NULL. */
const char *kv_get(const kv_t *kv, const char *key);
/* Number of distinct keys. */
size_t kv_count(const kv_t *kv);
const char *kv_version(void);

#endif
