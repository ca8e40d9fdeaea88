#ifndef HASH_H
#define HASH_H
#include <stddef.h>
/* internal helpers: not part of the public API */
size_t hash_str(const char *s);
char *dup_str(const char *s);
#endif
