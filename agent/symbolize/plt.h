/* Names for PLT stubs, as perf and objdump give them (`puts@plt`): the
 * stubs in .plt, .plt.sec and .plt.got have no symbols, so a sample in one
 * (a call through the PLT, often the first frame of a library call) was
 * `binary+0x1060`.
 *
 * Each stub jumps through a GOT slot (x86-64: `jmp *disp(%rip)`); the slot's
 * relocation (R_X86_64_JUMP_SLOT in .rela.plt, R_X86_64_GLOB_DAT in
 * .rela.dyn for .plt.got) names the function; an R_X86_64_IRELATIVE one (a
 * library calling its own IFUNC, as libc calls memcpy) points at the
 * resolver, which an IFUNC symbol of .dynsym names (where objdump and perf
 * say `*ABS*+0xa0b30@plt`, we say `memcpy@plt`). On arm64 the stub's
 * `adrp x16; ldr x17, [x16, #lo12]` gives the slot (R_AARCH64_JUMP_SLOT and
 * the rest likewise). Other machines get no table (their stubs stay
 * unnamed). */
#ifndef CODEXRAY_AGENT_SYMBOLIZE_PLT_H
#define CODEXRAY_AGENT_SYMBOLIZE_PLT_H

#include <gelf.h>
#include <stddef.h>
#include <stdint.h>

struct plt;

/* The stubs of e (addresses as in the ELF file). NULL when it has none that
 * can be named, on another machine, or out of memory. The table owns its
 * names: it may outlive e. */
struct plt *plt__build(Elf *e);
/* p may be NULL. */
void plt__free(struct plt *p);

/* "name@plt" for the stub holding ELF address addr, or NULL; *start, when
 * not NULL, gets the stub's address. */
const char *plt__lookup(const struct plt *p, uint64_t addr, uint64_t *start);

size_t plt__count(const struct plt *p);

#endif
