#ifndef SUMMARY_H
#define SUMMARY_H
#include <stddef.h>

struct summary {
    size_t count;
    double min, max, sum, sumsq;
};

void summary_init(struct summary *s);
void summary_add(struct summary *s, double x);
double summary_mean(const struct summary *s);
double summary_stddev(const struct summary *s);
#endif
