/* Test-only stand-in for Windows 10's bcryptprimitives.dll, which Wine 8.0 (Debian 12) lacks.
 * Rust's standard library imports ProcessPrng from it for random hash keys; on real Windows
 * the system DLL is used and this file is never shipped. Built and placed beside the test
 * programs by scripts/windows.sh. */
#include <windows.h>
#include <bcrypt.h>

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (BCryptGenRandom(NULL, data, n, BCRYPT_USE_SYSTEM_PREFERRED_RNG) != 0) return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}
