/*
 * A cc/ file that reaches into the server: with cc's include root
 * (build/layers/cc) this must not compile. ctest runs the compiler on it
 * and passes when the compiler fails (CMakeLists.txt, layers.*).
 */
#include "cc/cc.h"
#include "server/node.h"

int layers_check(void);
int layers_check(void) { return 0; }
