#ifndef RPN_OPS_H
#define RPN_OPS_H

#include "stack.h"

/* Apply operator `tok` to the stack.
 * Returns 0 on success, 1 if tok is not an operator, -1 on error (message in *err). */
int apply_op(const char *tok, Stack *s, const char **err);

#endif
