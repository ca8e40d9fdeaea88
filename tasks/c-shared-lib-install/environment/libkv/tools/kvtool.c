/* kvtool: reads KEY=VALUE lines from stdin (other lines are ignored), then
 *   kvtool count      prints the number of distinct keys
 *   kvtool get KEY    prints the value of KEY (exit 1 if missing)
 *   kvtool version    prints the library version (does not read stdin)
 */
#include <stdio.h>
#include <string.h>
#include "kv.h"

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "version") == 0) {
        printf("%s\n", kv_version());
        return 0;
    }
    if (argc < 2 || (strcmp(argv[1], "get") == 0 && argc < 3)) {
        fprintf(stderr, "usage: kvtool count|get KEY|version < FILE\n");
        return 2;
    }
    kv_t *kv = kv_new();
    char line[4096];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = 0;
        char *eq = strchr(line, '=');
        if (!eq || eq == line) continue;
        *eq = 0;
        kv_put(kv, line, eq + 1);
    }
    int rc = 0;
    if (strcmp(argv[1], "count") == 0) {
        printf("%zu\n", kv_count(kv));
    } else {
        const char *v = kv_get(kv, argv[2]);
        if (v) printf("%s\n", v); else rc = 1;
    }
    kv_free(kv);
    return rc;
}
