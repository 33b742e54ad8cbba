#include "config.h"  // include/config.h: this folder has none

#ifndef TRAIN_CONFIG
#error main.cpp must read include/config.h, not another source's config.h
#endif

int main() { return 0; }
