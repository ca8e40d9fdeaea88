#ifndef RPN_PARSE_H
#define RPN_PARSE_H

/* Parse a whole token as a number. Returns 0 on success, -1 if it is not a number. */
int parse_number(const char *tok, double *out);

#endif
