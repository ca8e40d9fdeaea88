#!/bin/bash
set -euo pipefail
cd /app/stats
make 2>&1 | head -n 20 || true
sed -i 's/s->sumsq += x \* x$/s->sumsq += x * x;/' summary.c
sed -i 's/#include "summary.h"/#include <math.h>\n#include "summary.h"/' summary.c
sed -i 's/summary_stdev(/summary_stddev(/' main.c
sed -i 's/int main(int argc, char \*\*argv)/int main(void)/' main.c
sed -i 's/        return 1;/        return 0;/' main.c
sed -i 's/-o stats main.c summary.c$/-o stats main.c summary.c -lm/' Makefile
make clean && make
echo "1 2 3 4" | ./stats
printf '' | ./stats; echo "exit $?"
