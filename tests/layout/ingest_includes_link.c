/*
 * ingest_includes_link.c - the control for link_includes_ingest.c: the
 * ingest stage links the link stage, so with the ingest library's include
 * path the link's header compiles.  If this fails,
 * layout.link_includes_ingest's failure would prove nothing.
 */
#include "link_wire.h"

int main(void) { return 0; }
