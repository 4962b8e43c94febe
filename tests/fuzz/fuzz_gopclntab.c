/* fuzz_gopclntab.c: a Go binary's .gopclntab (a file any user may build): the input is the
 * section, wrapped in a minimal ELF with a .text, then opened and looked up across the text. */
#include <elf.h>
#include <gelf.h>
#include <libelf.h>

#include "fuzz_common.h"
#include "gopclntab.h"

#define TEXT_ADDR 0x401000ull
#define TEXT_SIZE 0x200000ull

static const char shstrtab[] = "\0.gopclntab\0.text\0.shstrtab";

/* ELF header, then the section, then the names, then 4 section headers. */
static uint8_t *wrap(const uint8_t *data, size_t size, size_t *ret_len)
{
	size_t tab_off = sizeof(Elf64_Ehdr), str_off = tab_off + size, sh_off = (str_off + sizeof(shstrtab) + 7) & ~7ul;
	size_t len = sh_off + 4 * sizeof(Elf64_Shdr);
	uint8_t *img = calloc(1, len);
	Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
	Elf64_Shdr *sh;

	if (!img)
		return NULL;
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = ET_EXEC;
	eh->e_machine = EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_ehsize = sizeof(Elf64_Ehdr);
	eh->e_shoff = sh_off;
	eh->e_shentsize = sizeof(Elf64_Shdr);
	eh->e_shnum = 4;
	eh->e_shstrndx = 3;
	memcpy(img + tab_off, data, size);
	memcpy(img + str_off, shstrtab, sizeof(shstrtab));
	sh = (Elf64_Shdr *)(img + sh_off);
	sh[1] = (Elf64_Shdr){ .sh_name = 1, .sh_type = SHT_PROGBITS, .sh_flags = SHF_ALLOC, .sh_addr = 0x600000,
			      .sh_offset = tab_off, .sh_size = size, .sh_addralign = 1 };
	sh[2] = (Elf64_Shdr){ .sh_name = 12, .sh_type = SHT_NOBITS, .sh_flags = SHF_ALLOC | SHF_EXECINSTR,
			      .sh_addr = TEXT_ADDR, .sh_size = TEXT_SIZE, .sh_addralign = 16 };
	sh[3] = (Elf64_Shdr){ .sh_name = 18, .sh_type = SHT_STRTAB, .sh_offset = str_off, .sh_size = sizeof(shstrtab),
			      .sh_addralign = 1 };
	*ret_len = len;
	return img;
}

static void check(const struct gopcln_frame *f, size_t n, size_t max)
{
	if (n > max)
		abort();
	for (size_t i = 0; i < n; i++)
		if (!f[i].function || strnlen(f[i].function, 4097) > 4096 || f[i].line < 0)
			abort(); /* names are NUL-terminated inside the section, lines never negative */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gopcln_frame fr[16];
	struct gopcln *g = NULL;
	uint8_t *img;
	size_t len, n;
	Elf *elf;

	fuzz_quiet();
	elf_version(EV_CURRENT);
	img = wrap(data, size, &len);
	if (!img)
		return 0;
	elf = elf_memory((char *)img, len);
	if (elf && gopcln_open(elf, &g) == 0) {
		for (uint64_t pc = TEXT_ADDR - 16; pc < TEXT_ADDR + TEXT_SIZE; pc += 0x1f3) {
			gopcln_lookup(g, pc, fr, 16, &n);
			check(fr, n, 16);
		}
		gopcln_lookup(g, 0, fr, 1, &n);
		gopcln_lookup(g, UINT64_MAX, fr, 16, &n);
	}
	gopcln_free(g);
	if (elf)
		elf_end(elf);
	free(img);
	return 0;
}
