/*
 * dlsym, interposed without breaking RTLD_NEXT.
 *
 * glibc's dlsym answers RTLD_NEXT relative to the object that called it, which
 * it finds from its return address. A C++ wrapper that calls the real dlsym
 * would make every foreign dlsym(RTLD_NEXT, ...) relative to libvgpumem.so --
 * a library after us asking for its "next" malloc could get its own back.
 * So dlsym is this trampoline: it asks vgpumem_dlsym_intercept whether the
 * name is one of our hooks; if so it returns the hook, otherwise it *jumps*
 * (not calls) to glibc's dlsym with the caller's arguments and return address
 * untouched, so glibc sees the original caller.
 */
#if defined(__x86_64__)
    .text
    .globl  dlsym
    .type   dlsym, @function
    .p2align 4
dlsym:
    .cfi_startproc
    pushq   %rdi
    .cfi_adjust_cfa_offset 8
    pushq   %rsi
    .cfi_adjust_cfa_offset 8
    subq    $8, %rsp                 /* keep the stack 16-byte aligned for the call */
    .cfi_adjust_cfa_offset 8
    call    vgpumem_dlsym_intercept@PLT
    addq    $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq    %rsi
    .cfi_adjust_cfa_offset -8
    popq    %rdi
    .cfi_adjust_cfa_offset -8
    testq   %rax, %rax
    jnz     1f
    jmpq    *vgpumem_glibc_dlsym(%rip)
1:
    ret
    .cfi_endproc
    .size   dlsym, .-dlsym
#endif
    .section .note.GNU-stack,"",@progbits
