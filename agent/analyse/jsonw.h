/* jsonw.h: JSON string output for report, diff and the HTML page: valid UTF-8
 * always, and safe to embed in a <script> element. */
#ifndef PROWL_JSONW_H
#define PROWL_JSONW_H

#include "sbuf.h"

/* Appends s as a quoted JSON string. Invalid UTF-8 becomes U+FFFD; <, >, &
 * and the line separators U+2028/2029 are escaped, so "</script>" in a function
 * name cannot end the script it is embedded in. */
int json_str(struct sbuf *b, const char *s);
/* A finite number with up to `decimals` decimals ("0" for NaN/inf). */
int json_num(struct sbuf *b, double v, int decimals);

#endif
