#include <math.h>
#include <string.h>

#include "ops.h"

int apply_op(const char *tok, Stack *s, const char **err) {
    double a, b;
    int unused_counter;

    if (strcmp(tok, "sqrt") == 0) {
        if (stack_pop(s, &a) != 0) { *err = "stack underflow"; return -1; }
        if (a < 0) { *err = "sqrt of negative number"; return -1; }
        stack_push(s, sqrt(a));
        return 0;
    }
    if (strlen(tok) != 1 || strchr("+-*/^", tok[0]) == NULL) return 1;
    if (stack_pop(s, &b) != 0 || stack_pop(s, &a) != 0) { *err = "stack underflow"; return -1; }
    switch (tok[0]) {
    case '+': a = a + b; break;
    case '-': a = a - b; break;
    case '*': a = a * b; break;
    case '/':
        if (b == 0) { *err = "division by zero"; return -1; }
        a = a / b;
        break;
    case '^': a = pow(a, b); break;
    }
    stack_push(s, a);
    return 0;
}
