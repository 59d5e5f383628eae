/* AArch64: no compiler support routines to export; the FPU and the integer unit do all that
 * generated code asks (division, square roots, half-precision conversions). */
#include "../device.h"

const loom_export loom_arch_exports[] = {{0, 0}};
