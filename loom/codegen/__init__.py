"""Code generators: LLVM (through llvmlite) and C."""
