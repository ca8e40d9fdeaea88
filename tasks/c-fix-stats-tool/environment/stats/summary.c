#include "summary.h"

void summary_init(struct summary *s) {
    s->count = 0;
    s->min = s->max = s->sum = s->sumsq = 0.0;
}

void summary_add(struct summary *s, double x) {
    if (s->count == 0 || x < s->min) s->min = x;
    if (s->count == 0 || x > s->max) s->max = x;
    s->sum += x;
    s->sumsq += x * x
    s->count++;
}

double summary_mean(const struct summary *s) {
    return s->count ? s->sum / s->count : 0.0;
}

/* population standard deviation */
double summary_stddev(const struct summary *s) {
    if (s->count == 0) return 0.0;
    double m = summary_mean(s);
    double var = s->sumsq / s->count - m * m;
    return sqrt(var < 0 ? 0 : var);
}
