#ifndef RPN_STACK_H
#define RPN_STACK_H

#define STACK_MAX 64

typedef struct {
    double v[STACK_MAX];
    int n;
} Stack;

void stack_init(Stack *s);
int stack_push(Stack *s, double x);   /* 0 ok, -1 overflow */
int stack_pop(Stack *s, double *out); /* 0 ok, -1 underflow */

#endif
