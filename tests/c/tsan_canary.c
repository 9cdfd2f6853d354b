/* A deliberate data race: tests/run_tsan.sh requires ThreadSanitizer to report it, which
 * proves that gcc's instrumentation and the linked runtime really work together (a
 * silent TSan run would otherwise prove nothing). Not part of the normal C tests. */
#include <pthread.h>
#include <stdio.h>

#include "ember.h"

static long counter;

static void *bump(void *arg) {
    (void)arg;
    counter++; /* unsynchronised on purpose */
    return NULL;
}

int main(void) {
    pthread_t a, b;
    pthread_create(&a, NULL, bump, NULL);
    pthread_create(&b, NULL, bump, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    /* Links the engine too, so its instrumented code shares the runtime. */
    printf("counter %ld, ember %s\n", counter, ember_version());
    return 0;
}
