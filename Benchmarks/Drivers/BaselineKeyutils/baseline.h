// What dp-keyringbench's raw baseline calls directly: libkeyutils (the library's own CKeyutils is internal to it).
#include <keyutils.h>
