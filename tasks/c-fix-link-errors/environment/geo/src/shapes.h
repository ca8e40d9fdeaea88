#ifndef SHAPES_H
#define SHAPES_H

/* number of shapes read so far */
int shape_count = 0;

double circle_area(double r);
double rect_area(double w, double h);
double tri_area(double a, double b, double c);   /* Heron's formula; -1 if not a triangle */
double area_total(void);

inline double square(double x) { return x * x; }

#endif
