#include <stdio.h>
#include <string.h>

#include "ops.h"
#include "parse.h"
#include "stack.h"

/* rpn "3 4 + 2 *"  -> prints 14 */
int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s \"EXPRESSION\"\n", argv[0]);
        return 2;
    }
    char buf[4096];
    if (strlen(argv[1]) >= sizeof buf) { fprintf(stderr, "error: expression too long\n"); return 2; }
    strcpy(buf, argv[1]);
    for (int i = 0; i < strlen(buf); i++)
        if (buf[i] == '\t' || buf[i] == '\n') buf[i] = ' ';

    Stack s;
    stack_init(&s);
    for (char *tok = strtok(buf, " "); tok != NULL; tok = strtok(NULL, " ")) {
        double x;
        const char *err = NULL;
        if (parse_number(tok, &x) == 0) {
            if (stack_push(&s, x) != 0) { fprintf(stderr, "error: stack overflow\n"); return 2; }
            continue;
        }
        int rc = apply_op(tok, &s, &err);
        if (rc == 1) { fprintf(stderr, "error: unknown token '%s'\n", tok); return 2; }
        if (rc != 0) { fprintf(stderr, "error: %s\n", err); return 2; }
    }
    double result;
    if (s.n != 1 || stack_pop(&s, &result) != 0) {
        fprintf(stderr, "error: expression leaves %d values on the stack\n", s.n);
        return 2;
    }
    printf("%.10g\n", result);
    return 0;
}
