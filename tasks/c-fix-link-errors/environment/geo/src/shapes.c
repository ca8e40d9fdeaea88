#include <math.h>
#include "shapes.h"

static double total = 0.0;

static void add(double a) {
    total += a;
    shape_count++;
}

double circle_area(double r) {
    double a = M_PI * square(r);
    add(a);
    return a;
}

double rect_area(double w, double h) {
    add(w * h);
    return w * h;
}

double tri_area(double a, double b, double c) {
    double s = (a + b + c) / 2;
    double q = s * (s - a) * (s - b) * (s - c);
    if (a <= 0 || b <= 0 || c <= 0 || q <= 0) return -1;
    double area = sqrt(q);
    add(area);
    return area;
}

static double area_total(void) {
    return total;
}
