#include <stdio.h>
#include "summary.h"

/* Reads whitespace-separated numbers from stdin and prints a summary. */
int main(int argc, char **argv) {
    struct summary s;
    double x;
    summary_init(&s);
    while (scanf("%lf", &x) == 1)
        summary_add(&s, x);
    if (s.count == 0) {
        printf("count 0\n");
        return 1;
    }
    printf("count %zu\n", s.count);
    printf("min %.3f\nmax %.3f\n", s.min, s.max);
    printf("mean %.3f\n", summary_mean(&s));
    printf("stddev %.3f\n", summary_stdev(&s));
    return 0;
}
