#include <stdlib.h>
#include <string.h>
#include "kv.h"
#include "hash.h"

#define NBUCKETS 64

struct entry {
    char *key, *value;
    struct entry *next;
};

struct kv {
    struct entry *buckets[NBUCKETS];
    size_t count;
};

kv_t *kv_new(void) {
    return calloc(1, sizeof(kv_t));
}

void kv_free(kv_t *kv) {
    if (!kv) return;
    for (size_t i = 0; i < NBUCKETS; i++) {
        struct entry *e = kv->buckets[i];
        while (e) {
            struct entry *next = e->next;
            free(e->key);
            free(e->value);
            free(e);
            e = next;
        }
    }
    free(kv);
}

int kv_put(kv_t *kv, const char *key, const char *value) {
    size_t b = hash_str(key) % NBUCKETS;
    struct entry *e = malloc(sizeof *e);
    if (!e) return -1;
    e->key = dup_str(key);
    e->value = dup_str(value);
    e->next = kv->buckets[b];
    kv->buckets[b] = e;
    kv->count++;
    return 0;
}

const char *kv_get(const kv_t *kv, const char *key) {
    for (struct entry *e = kv->buckets[hash_str(key) % NBUCKETS]; e; e = e->next)
        if (strcmp(e->key, key) == 0) return e->value;
    return NULL;
}

size_t kv_count(const kv_t *kv) {
    return kv->count;
}

const char *kv_version(void) {
    return KV_VERSION;
}
