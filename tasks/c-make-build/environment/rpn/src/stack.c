#include "stack.h"

void stack_init(Stack *s) { s->n = 0; }

int stack_push(Stack *s, double x) {
    if (s->n >= STACK_MAX) return -1;
    s->v[s->n++] = x;
    return 0;
}

int stack_pop(Stack *s, double *out) {
    if (s->n <= 0) return -1;
    *out = s->v[--s->n];
    return 0;
}
