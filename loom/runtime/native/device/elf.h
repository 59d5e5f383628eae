/* The parts of the ELF format the module loader reads, in the device's own class: ELF32 on a
 * 32-bit device (Hexagon), ELF64 on a 64-bit one (AArch64). A module of the other class is
 * refused by its e_ident before any of these structures is read. */
#ifndef LOOM_DEVICE_ELF_H
#define LOOM_DEVICE_ELF_H
#include <stdint.h>

#define ELFCLASS32 1
#define ELFCLASS64 2
#define ELFDATA2LSB 1
#define ET_DYN 3

#define PT_LOAD 1
#define PT_DYNAMIC 2
#define PT_TLS 7
#define PF_X 1
#define PF_W 2
#define PF_R 4

#define DT_NULL 0
#define DT_NEEDED 1
#define DT_PLTRELSZ 2
#define DT_HASH 4
#define DT_STRTAB 5
#define DT_SYMTAB 6
#define DT_RELA 7
#define DT_RELASZ 8
#define DT_RELAENT 9
#define DT_STRSZ 10
#define DT_SYMENT 11
#define DT_INIT 12
#define DT_REL 17
#define DT_PLTREL 20
#define DT_JMPREL 23
#define DT_INIT_ARRAY 25
#define DT_INIT_ARRAYSZ 27
#define DT_PREINIT_ARRAY 32

#define SHN_UNDEF 0
#define STB_WEAK 2
#define STT_FUNC 2

#if UINTPTR_MAX == 0xffffffffu
#define LOOM_ELF_CLASS ELFCLASS32
typedef struct {
    uint8_t e_ident[16];
    uint16_t e_type, e_machine;
    uint32_t e_version, e_entry, e_phoff, e_shoff, e_flags;
    uint16_t e_ehsize, e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx;
} Elf_Ehdr;
typedef struct {
    uint32_t p_type, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz, p_flags, p_align;
} Elf_Phdr;
typedef struct {
    int32_t d_tag;
    uint32_t d_val;
} Elf_Dyn;
typedef struct {
    uint32_t st_name, st_value, st_size;
    uint8_t st_info, st_other;
    uint16_t st_shndx;
} Elf_Sym;
typedef struct {
    uint32_t r_offset, r_info;
    int32_t r_addend;
} Elf_Rela;
#define ELF_R_SYM(info) ((info) >> 8)
#define ELF_R_TYPE(info) ((info)&0xff)
#else
#define LOOM_ELF_CLASS ELFCLASS64
typedef struct {
    uint8_t e_ident[16];
    uint16_t e_type, e_machine;
    uint32_t e_version;
    uint64_t e_entry, e_phoff, e_shoff;
    uint32_t e_flags;
    uint16_t e_ehsize, e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx;
} Elf_Ehdr;
typedef struct {
    uint32_t p_type, p_flags;
    uint64_t p_offset, p_vaddr, p_paddr, p_filesz, p_memsz, p_align;
} Elf_Phdr;
typedef struct {
    int64_t d_tag;
    uint64_t d_val;
} Elf_Dyn;
typedef struct {
    uint32_t st_name;
    uint8_t st_info, st_other;
    uint16_t st_shndx;
    uint64_t st_value, st_size;
} Elf_Sym;
typedef struct {
    uint64_t r_offset, r_info;
    int64_t r_addend;
} Elf_Rela;
#define ELF_R_SYM(info) ((info) >> 32)
#define ELF_R_TYPE(info) ((info)&0xffffffffu)
#endif
#endif
