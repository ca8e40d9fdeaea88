#!/bin/bash
set -euo pipefail
cd /app/geo
make 2>&1 | tail -n 15 || true
# a variable defined in a header: declare it there, define it once
sed -i 's/^int shape_count = 0;$/extern int shape_count;/' src/shapes.h
sed -i 's/^static double total = 0.0;$/static double total = 0.0;\nint shape_count = 0;/' src/shapes.c
# C99 inline in a header needs static (or an extern definition)
sed -i 's/^inline double square/static inline double square/' src/shapes.h
# area_total is part of the interface
sed -i 's/^static double area_total(void) {$/double area_total(void) {/' src/shapes.c
# M_PI is not in strict C99
sed -i 's/^#include <math.h>$/#define _XOPEN_SOURCE 700\n#include <math.h>/' src/shapes.c
# libraries after the objects; header dependency
sed -i 's/^\t$(CC) -lm -o geo $(OBJS)$/\t$(CC) -o geo $(OBJS) -lm/' Makefile
sed -i 's/^src\/%.o: src\/%.c$/src\/%.o: src\/%.c src\/shapes.h/' Makefile
make clean && make
printf 'circle 1\nrect 2 3\ntri 3 4 5\ntri 1 1 5\nhello\n' | ./geo
