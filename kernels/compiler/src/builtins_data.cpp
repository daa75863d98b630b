// Embeds the builtin library bitcode (built at build time) in the library.
#ifndef MANYCL_BUILTINS_BC_PATH
#error "MANYCL_BUILTINS_BC_PATH must be defined"
#endif
asm(".section .rodata\n"
    ".globl manycl_builtins_bc\n"
    ".hidden manycl_builtins_bc\n"
    ".balign 16\n"
    "manycl_builtins_bc:\n"
    ".incbin \"" MANYCL_BUILTINS_BC_PATH "\"\n"
    ".globl manycl_builtins_bc_end\n"
    ".hidden manycl_builtins_bc_end\n"
    "manycl_builtins_bc_end:\n"
    ".byte 0\n"
    ".previous\n");
