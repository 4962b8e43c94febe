/* split532_fp.c: split532.c built with frame pointers, for --unwind=fp: the same
 * 50/30/20 split, whose stacks a frame-pointer walk follows to the thread's entry (leaf
 * functions keep a frame record too: arm64 compilers leave it out by default). */
/* BUILD: -O2 -g -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -pthread */
#include "split532.c"
