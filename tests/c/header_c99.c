/* Compiles the header as strict C99 and checks a few ABI facts at run time. */
#include "ember.h"

#include <stdio.h>
#include <string.h>

int main(void) {
    ember_str s = {NULL, 0};
    ember_request_info info;
    ember_stats st;
    memset(&info, 0, sizeof info);
    memset(&st, 0, sizeof st);
    (void)s;
    if (ember_abi_version() != EMBER_ABI_VERSION || sizeof(ember_request) != 8 || sizeof(ember_result) != 4) {
        puts("0 passed, 1 failed");
        return 1;
    }
    puts("1 passed, 0 failed");
    return 0;
}
