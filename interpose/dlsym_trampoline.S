/*
 * dlsym, interposed without breaking RTLD_NEXT (x86-64).
 *
 * glibc's dlsym answers RTLD_NEXT (and, for objects with a scope of their
 * own, RTLD_DEFAULT) relative to the object that called it, which it finds
 * from its return address. So this trampoline never lets glibc see a return
 * address inside libvgpumem.so on a caller's behalf. It passes the caller's
 * return address to vgpumem_dlsym_intercept(handle, name, caller, &gadget),
 * whose answer is one of:
 *
 *  - NULL: not ours to answer. The trampoline *jumps* (not calls) to glibc's
 *    dlsym with the caller's arguments and return address untouched.
 *  - 1: a hooked name (a driver's, or a library function's) looked up
 *    through RTLD_NEXT or RTLD_DEFAULT:
 *    glibc's answer for the caller decides. The trampoline calls glibc's
 *    dlsym with a return address inside the caller's object -- `gadget`, the
 *    address of a `ret` instruction there -- above which it has pushed its own
 *    continuation: glibc returns to the gadget, whose `ret` comes back here
 *    with glibc's answer for the caller, which vgpumem_dlsym_decide(found,
 *    name) turns into ours (the hook, if glibc found the driver's or the
 *    library's function or the hook itself; glibc's answer otherwise).
 *  - anything else: the answer.
 *
 * If glibc's dlsym is unknown (vgpumem_glibc_dlsym is NULL, which glibc never
 * allows), the answer is NULL: the trampoline never jumps to address 0.
 *
 * While glibc runs on the caller's behalf, its return address is the gadget:
 * a backtrace taken inside that call shows the caller's object there.
 */
#if defined(__x86_64__)
    .text
    .globl  dlsym
    .type   dlsym, @function
    .p2align 4
dlsym:
    .cfi_startproc
    pushq   %rdi                     /* handle */
    .cfi_adjust_cfa_offset 8
    pushq   %rsi                     /* name */
    .cfi_adjust_cfa_offset 8
    subq    $8, %rsp                 /* the gadget's slot; keeps the stack 16-byte aligned for the call */
    .cfi_adjust_cfa_offset 8
    movq    24(%rsp), %rdx           /* the caller's return address */
    movq    %rsp, %rcx               /* &gadget */
    call    vgpumem_dlsym_intercept@PLT
    cmpq    $1, %rax
    je      2f
    .cfi_remember_state
    addq    $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq    %rsi
    .cfi_adjust_cfa_offset -8
    popq    %rdi
    .cfi_adjust_cfa_offset -8
    testq   %rax, %rax
    jnz     1f                       /* our answer */
    movq    vgpumem_glibc_dlsym(%rip), %r11
    testq   %r11, %r11
    jz      1f                       /* no glibc dlsym: NULL */
    jmpq    *%r11                    /* glibc answers, seeing the original caller */
1:
    ret
    .cfi_restore_state
2:
    /* Ask glibc on the caller's behalf. Stack: gadget, name, handle, return address. */
    movq    vgpumem_glibc_dlsym(%rip), %r11
    testq   %r11, %r11
    jz      4f
    movq    16(%rsp), %rdi
    movq    8(%rsp), %rsi
    movq    (%rsp), %r10
    subq    $8, %rsp                 /* so that glibc starts with the alignment a call gives */
    .cfi_adjust_cfa_offset 8
    leaq    3f(%rip), %rax
    pushq   %rax                     /* where the gadget's ret comes back to */
    .cfi_adjust_cfa_offset 8
    pushq   %r10                     /* glibc's return address: inside the caller's object */
    .cfi_adjust_cfa_offset 8
    jmpq    *%r11
3:
    .cfi_adjust_cfa_offset -16       /* glibc's ret and the gadget's ret popped both */
    addq    $8, %rsp
    .cfi_adjust_cfa_offset -8
    movq    %rax, %rdi               /* glibc's answer for the caller */
    movq    8(%rsp), %rsi            /* name */
    call    vgpumem_dlsym_decide@PLT
    jmp     5f
4:
    xorl    %eax, %eax
5:
    addq    $24, %rsp
    .cfi_adjust_cfa_offset -24
    ret
    .cfi_endproc
    .size   dlsym, .-dlsym
#endif
    .section .note.GNU-stack,"",@progbits
