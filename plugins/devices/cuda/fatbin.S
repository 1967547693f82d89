/* The kernels of kernels.cu, compiled by nvcc into a fatbin (CUDA_FATBIN: its path, set by
 * CMakeLists.txt), as the read-only array cuda_fatbin that driver.c loads with
 * cuModuleLoadData. */
    .section .rodata
    .balign 64
    .globl cuda_fatbin
    .hidden cuda_fatbin
    .type cuda_fatbin, @object
cuda_fatbin:
    .incbin CUDA_FATBIN
    .byte 0
    .size cuda_fatbin, . - cuda_fatbin
    .section .note.GNU-stack, "", @progbits
