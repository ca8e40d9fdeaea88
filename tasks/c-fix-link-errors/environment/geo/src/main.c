#include <stdio.h>
#include <string.h>
#include "shapes.h"

/* Reads lines "circle R", "rect W H" or "tri A B C" from stdin; prints each area (3 decimals),
 * "invalid: LINE" for anything else, then "count N" and "total X". */
int main(void) {
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = 0;
        double a, b, c, area = -1;
        char extra;
        if (sscanf(line, "circle %lf %c", &a, &extra) == 1) area = circle_area(a);
        else if (sscanf(line, "rect %lf %lf %c", &a, &b, &extra) == 2) area = rect_area(a, b);
        else if (sscanf(line, "tri %lf %lf %lf %c", &a, &b, &c, &extra) == 3) area = tri_area(a, b, c);
        if (area < 0) printf("invalid: %s\n", line);
        else printf("%.3f\n", area);
    }
    printf("count %d\ntotal %.3f\n", shape_count, area_total());
    return 0;
}
