#include <errno.h>
#include <stdlib.h>

#include "parse.h"

int parse_number(const char *tok, double *out) {
    char *end;
    errno = 0;
    double x = strtod(tok, &end);
    if (end == tok || *end != '\0' || errno != 0) return -1;
    *out = x;
    return 0;
}
