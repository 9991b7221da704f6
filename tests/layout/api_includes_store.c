/*
 * api_includes_store.c - the control for store_includes_api.c: the API
 * stage links the store stage, so with the API library's include path the
 * store's header compiles.  If this fails, layout.wrong_way_include's
 * failure would prove nothing.
 */
#include "store.h"

int main(void) { return 0; }
