/* fakejvm.c: a forged HotSpot JVM for prowl's hostile-input tests: it exports the
 * serviceability symbols (gHotSpotVMStructs...) with tables that parse, and spins in an
 * executable "code cache" whose metadata is garbled as MODE says:
 *   segmap  the segment map leads nowhere (free, or hops that never reach a block)
 *   blob    a code blob named "nmethod" with a frame size of 2^31 words
 *   interp  an interpreter frame whose Method's names hold ';' and a newline, and a
 *           caller's sp below its own (a loop)
 *   nometa  tables without CodeCache::_heaps: metadata prowl cannot use
 * Usage: fakejvm MODE SECONDS. Built with -rdynamic (the symbols must be in .dynsym). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct sentry { const char *type, *field, *tstring; int32_t is_static; uint64_t offset; void *address; };
struct tentry { const char *type, *super; int32_t oop, integer, uns; uint64_t size; };
struct ientry { const char *name; int32_t value; };
struct lentry { const char *name; uint64_t value; };

/* The forged code cache: one heap over the executable region. */
struct vspace { uint64_t low_boundary, high_boundary, low, high; };
struct heap { struct vspace memory; struct vspace segmap; int32_t log2_seg; };
struct garray { int32_t len, max; void *data; };
struct stubq { uint64_t pad; void *buffer; int32_t limit; };

static struct heap heap0;
static void *heap_list[1] = { &heap0 };
static struct garray heaps = { 1, 1, heap_list };
static struct garray *heaps_ptr = &heaps;
static struct stubq interp_q;
static struct stubq *interp_ptr = &interp_q;
static uint8_t segmap[4096];

#define FIELD(t, f, off) { t, f, "int", 0, off, NULL }
static struct sentry structs[] = {
	{ "CodeCache", "_heaps", "GrowableArray<CodeHeap*>*", 1, 0, &heaps_ptr },
	FIELD("GrowableArrayBase", "_len", 0),
	FIELD("GrowableArray<int>", "_data", 8),
	FIELD("CodeHeap", "_memory", 0),
	FIELD("CodeHeap", "_segmap", 32),
	FIELD("CodeHeap", "_log2_segment_size", 64),
	FIELD("VirtualSpace", "_low_boundary", 0),
	FIELD("VirtualSpace", "_high_boundary", 8),
	FIELD("CodeBlob", "_name", 0),
	FIELD("CodeBlob", "_size", 8),
	FIELD("CodeBlob", "_frame_size", 12),
	FIELD("CodeBlob", "_frame_complete_offset", 16),
	FIELD("CodeBlob", "_code_offset", 20),
	FIELD("nmethod", "_method", 24),
	FIELD("nmethod", "_compile_id", 32),
	FIELD("Method", "_constMethod", 8),
	FIELD("ConstMethod", "_constants", 8),
	FIELD("ConstMethod", "_name_index", 16),
	FIELD("ConstMethod", "_signature_index", 18),
	FIELD("ConstMethod", "_code_size", 20),
	FIELD("ConstantPool", "_pool_holder", 8),
	FIELD("Klass", "_name", 8),
	FIELD("Symbol", "_length", 4),
	FIELD("Symbol", "_body", 6),
	{ "AbstractInterpreter", "_code", "StubQueue*", 1, 0, &interp_ptr },
	FIELD("StubQueue", "_stub_buffer", 8),
	FIELD("StubQueue", "_buffer_limit", 16),
	{ NULL, NULL, NULL, 0, 0, NULL },
};
static struct tentry types[] = {
	{ "ConstMethod", NULL, 0, 0, 0, 48 },
	{ "ConstantPool", NULL, 0, 0, 0, 64 },
	{ "HeapBlock", NULL, 0, 0, 0, 16 },
	{ NULL, NULL, 0, 0, 0, 0 },
};
static struct ientry ints[] = { { NULL, 0 } };
static struct lentry longs[] = { { NULL, 0 } };

struct sentry *gHotSpotVMStructs = structs;
struct tentry *gHotSpotVMTypes = types;
struct ientry *gHotSpotVMIntConstants = ints;
struct lentry *gHotSpotVMLongConstants = longs;
uint64_t gHotSpotVMStructEntryArrayStride = sizeof(struct sentry);
uint64_t gHotSpotVMStructEntryTypeNameOffset = offsetof(struct sentry, type);
uint64_t gHotSpotVMStructEntryFieldNameOffset = offsetof(struct sentry, field);
uint64_t gHotSpotVMStructEntryTypeStringOffset = offsetof(struct sentry, tstring);
uint64_t gHotSpotVMStructEntryIsStaticOffset = offsetof(struct sentry, is_static);
uint64_t gHotSpotVMStructEntryOffsetOffset = offsetof(struct sentry, offset);
uint64_t gHotSpotVMStructEntryAddressOffset = offsetof(struct sentry, address);
uint64_t gHotSpotVMTypeEntryArrayStride = sizeof(struct tentry);
uint64_t gHotSpotVMTypeEntryTypeNameOffset = offsetof(struct tentry, type);
uint64_t gHotSpotVMTypeEntrySizeOffset = offsetof(struct tentry, size);
uint64_t gHotSpotVMIntConstantEntryArrayStride = sizeof(struct ientry);
uint64_t gHotSpotVMIntConstantEntryNameOffset = offsetof(struct ientry, name);
uint64_t gHotSpotVMIntConstantEntryValueOffset = offsetof(struct ientry, value);
uint64_t gHotSpotVMLongConstantEntryArrayStride = sizeof(struct lentry);
uint64_t gHotSpotVMLongConstantEntryNameOffset = offsetof(struct lentry, name);
uint64_t gHotSpotVMLongConstantEntryValueOffset = offsetof(struct lentry, value);

/* The interp mode's Method: ConstMethod -> ConstantPool -> holder Klass -> a Symbol
 * whose text would break a folded line and inject a frame. */
static uint64_t evil_symbol[8];
static uint64_t klass[4], cpool[16], cmethod[8], method[4];

static void spin_at(uint8_t *code, uint64_t fake_bp, double secs)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		/* the code: 1e7 decrements of rcx, then ret; rbp is the forged frame's */
		__asm__ volatile("push %%rbp\n\tmov %0, %%rbp\n\tcall *%1\n\tpop %%rbp"
				 : : "r"(fake_bp), "r"(code) : "rcx", "memory");
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 > secs)
			return;
	}
}

int main(int argc, char **argv)
{
	static const uint8_t loop[] = { 0x48, 0xc7, 0xc1, 0x80, 0x96, 0x98, 0x00, /* mov rcx, 10000000 */
					0x48, 0xff, 0xc9,                         /* dec rcx */
					0x75, 0xfb,                               /* jnz back */
					0xc3 };                                   /* ret */
	uint64_t frame[16] = { 0 };
	const char *mode = argc > 1 ? argv[1] : "segmap";
	double secs = argc > 2 ? atof(argv[2]) : 5;
	uint8_t *cc = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *code;

	if (cc == MAP_FAILED)
		return 1;
	heap0.memory.low_boundary = heap0.memory.low = (uint64_t)cc;
	heap0.memory.high_boundary = heap0.memory.high = (uint64_t)cc + (1 << 20);
	heap0.segmap.low_boundary = heap0.segmap.low = (uint64_t)segmap;
	heap0.log2_seg = 8; /* 256-byte segments: 4096 of them */
	memset(segmap, 0xff, sizeof(segmap));
	interp_q.buffer = cc + (512 << 10); /* far from the code unless mode says */
	interp_q.limit = 4096;
	code = cc + 0x1000;
	if (strcmp(mode, "segmap") == 0) {
		/* hops of 1 from the code's segment down through 16 segments of 1s: never 0 */
		memset(segmap, 1, 0x1000 >> 8 | 1);
	} else if (strcmp(mode, "blob") == 0) {
		static const char name[] = "nmethod";
		uint64_t *blob = (uint64_t *)(cc + 0x1000 + 16);

		segmap[0x10] = 0;              /* the block at cc + 0x1000, its blob after the header */
		segmap[0x11] = 1;              /* the code's segment: one hop back */
		blob[0] = (uint64_t)name;      /* _name */
		((int32_t *)blob)[3] = 0x7fffffff; /* _frame_size, in words */
		((int32_t *)blob)[5] = 0x100;  /* _code_offset */
		code = (uint8_t *)blob + 0x100;
	} else if (strcmp(mode, "interp") == 0) {
		interp_q.buffer = cc;
		interp_q.limit = 0x2000;
		/* Symbol: length 16 at 4, body at 6 */
		((uint16_t *)evil_symbol)[2] = 16;
		memcpy((char *)evil_symbol + 6, "evil;Name\nfoo;x", 16);
		klass[1] = (uint64_t)evil_symbol;      /* Klass::_name */
		cpool[1] = (uint64_t)klass;            /* _pool_holder */
		cpool[8 + 1] = (uint64_t)evil_symbol;  /* cp[1]: the method's name */
		cmethod[1] = (uint64_t)cpool;          /* _constants */
		((uint16_t *)cmethod)[8] = 1;          /* _name_index */
		method[1] = (uint64_t)cmethod;         /* _constMethod */
		frame[8 - 3] = (uint64_t)method;       /* bp - 3 slots: Method* */
		frame[8 - 1] = 8;                      /* bp - 1: the sender's sp, garbage */
	} else if (strcmp(mode, "nometa") == 0) {
		structs[0].field = "_heaps_gone";
	} else {
		fprintf(stderr, "usage: fakejvm segmap|blob|interp|nometa SECONDS\n");
		return 2;
	}
	memcpy(code, loop, sizeof(loop));
	spin_at(code, (uint64_t)&frame[8], secs);
	return 0;
}
