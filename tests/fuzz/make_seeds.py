#!/usr/bin/env python3
"""Writes the fuzz seed corpora of the targets in GENERATED (tests/fuzz/corpus/<target>/) and
the regression inputs of the known defects (tests/fuzz/regressions/<target>/) from material in
the repository and a build directory (for the fixture and guest ELFs), then captures real stacks
for unwind_stack:

    python3 tests/fuzz/make_seeds.py build-asan [TARGET...]

TARGET arguments (e.g. gdb_packet) rewrite only the corpora made with those targets'.

The outputs are committed; run it again when an input format in fuzz_*.c changes (the stack
captures differ from run to run: the fixture's stack is placed at random). Crash inputs that
libFuzzer finds are added to regressions/ by hand, not by this script.
"""
import os
import re
import shutil
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def write(kind, target, name, data):
    d = os.path.join(HERE, kind, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def seed(target, name, data):
    write("corpus", target, name, data)


def regression(target, name, data):
    write("regressions", target, name, data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def elf_sections(path):
    """{name: (addr, bytes)} of a little-endian ELF64 file."""
    b = read(path)
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", b, shoff + i * shentsize) for i in range(shnum)]
    strtab = headers[shstrndx]
    out = {}
    for name_off, _type, _flags, addr, off, size in headers:
        start = strtab[4] + name_off
        name = b[start:b.index(b"\0", start)].decode()
        out[name] = (addr, b[off:off + size])
    return out


# ---- .eh_frame tables (the same builder as tests/unwind/test_cfi_check.c) -------------------

TEXT, TEXT_SIZE, EH_FRAME_ADDR = 0x401000, 0x1000, 0x500000


def entry(body):
    """Length + body, padded with DW_CFA_nop to 8 bytes."""
    body += b"\0" * (-(len(body) + 4) % 8)
    return struct.pack("<I", len(body)) + body


def table(instructions):
    """CIE "zR" (udata4, code 1, data -8, RA 16, CFA rsp+8, RA at CFA-8), one FDE over the
    text with these instructions, the terminator."""
    cie = entry(struct.pack("<I", 0) + bytes([1]) + b"zR\0" +
                bytes([1, 0x78, 16, 1, 0x03, 0x0c, 7, 8, 0x90, 1]))
    fde_ptr = len(cie) + 4
    fde = entry(struct.pack("<IIIB", fde_ptr, TEXT, TEXT_SIZE, 0) + bytes(instructions))
    return cie + fde + struct.pack("<I", 0)


def eh_frame_input(eh_frame, text=TEXT, text_size=TEXT_SIZE, pc_off=8, addr=EH_FRAME_ADDR):
    return struct.pack("<QIIQ", text, text_size, pc_off, addr) + eh_frame


def eh_frame_seeds(build):
    seed("eh_frame", "prologue", eh_frame_input(table(
        [0x41, 0x0e, 0x10, 0x86, 0x02, 0x0a, 0x41, 0x0e, 0x08, 0x0b, 0xc6])))
    seed("eh_frame", "expressions", eh_frame_input(table(
        [0x0f, 3, 0x77, 0xa0, 0x01, 0x10, 16, 2, 0x77, 0x28, 0x16, 6, 5, 0x76, 0x10, 0x06,
         0x23, 0x08, 0x0f, 6, 0x30, 0x28, 0x01, 0x00, 0x96, 0x31])))
    seed("eh_frame", "gnu-ops", eh_frame_input(table(
        [0x2e, 0x10, 0x2f, 3, 2, 0x14, 3, 1, 0x15, 3, 0x7e, 0x13, 0x7f, 0x07, 16])))
    for elf in ("user/spin", "user-nofp/sys", "kernel.elf"):
        path = os.path.join(build, "guest", elf)
        if not os.path.exists(path):
            print("no %s: skipped" % path)
            continue
        secs = elf_sections(path)
        text_addr, text = secs[".text"]
        eh_addr, eh = secs[".eh_frame"]
        seed("eh_frame", "guest-" + elf.replace("/", "-"),
             eh_frame_input(eh, text_addr, len(text), 0x20, eh_addr))

    # The known defects: libdw's register table sized by a register number (24 s, 2.1 GB per
    # walk), and expressions whose evaluation leaks 256 bytes per walk in libdwfl 0.188.
    regression("eh_frame", "huge-register-undefined",
               eh_frame_input(table([0x07, 0xfe, 0xff, 0xff, 0x7f])))
    regression("eh_frame", "expression-xderef-leak",
               eh_frame_input(table([0x10, 16, 2, 0x30, 0x18])))
    regression("eh_frame", "expression-skip-loop-leak",
               eh_frame_input(table([0x10, 16, 3, 0x2f, 0xfd, 0xff])))
    regression("eh_frame", "expression-overlong-sleb-leak",
               eh_frame_input(table([0x10, 16, 13, 0x11] + [0x80] * 10 + [0x18])))
    regression("eh_frame", "advance-loc1-past-end",
               eh_frame_input(table([0x41] * 6 + [0x02])))


# ---- The other targets ----------------------------------------------------------------------

QMP_MESSAGES = [
    b'{"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}, '
    b'"package": "Debian 1:7.2+dfsg-7+deb12u18+b3"}, "capabilities": ["oob"]}}\r\n',
    b'{"return": {}, "id": 1}\r\n',
    b'{"timestamp": {"seconds": 1795290133, "microseconds": 291249}, "event": "STOP"}\r\n',
    b'{"return": "fffffffffffffff0: Cannot access memory\\r\\n", "id": 3}\r\n',
    b'{"id": 4, "error": {"class": "GenericError", "desc": "Invalid addr '
    b'0xfffffffffffffff0/size 16 specified"}}\r\n',
    b'{"return": {"status": "running", "singlestep": false, "running": true}, "id": 5}\r\n',
]


def qmp_seeds():
    seed("qmp_parser", "session", bytes([0x80]) + b"".join(QMP_MESSAGES))
    for i, m in enumerate(QMP_MESSAGES):
        seed("qmp_parser", "message-%d" % i, bytes([(i * 53) % 256]) + m)
    regs = read(os.path.join(ROOT, "tests/data/qemu-transcripts/info_registers_cpl3.txt"))
    hmp = regs.decode().replace("\\", "\\\\").replace('"', '\\"').replace("\r", "\\r")
    hmp = hmp.replace("\n", "\\r\\n")
    seed("qmp_parser", "hmp-registers",
         bytes([0x40]) + b'{"return": "' + hmp.encode() + b'", "id": 7}\r\n')
    seed("qmp_parser", "values", bytes([0x20]) +
         b'{"a": [1, -2.5e3, 18446744073709551615, true, null, {"b": "\\u00e9\\ud83d\\ude00"}]}\n')
    seed("qmp_parser", "not-qmp", bytes([0x10]) + b"SSH-2.0-OpenSSH_9.2\r\n")

    for name in ("info_registers_a_smp2.txt", "info_registers_cpl0.txt",
                 "info_registers_cpl3.txt", "riscv64_info_registers_s_mode.txt",
                 "riscv64_info_registers_u_mode.txt", "aarch64_info_registers_el1.txt",
                 "aarch64_info_registers_el0.txt"):
        seed("registers", name, read(os.path.join(ROOT, "tests/data/qemu-transcripts", name)))


def gdb_frame(payload):
    """`$payload#xx` with `$#}*` escaped, as gdb_frame() builds it."""
    body = bytearray()
    for c in payload:
        if c in b"$#}*":
            body += bytes([ord("}"), c ^ 0x20])
        else:
            body.append(c)
    return b"$" + bytes(body) + b"#%02x" % (sum(body) % 256)


def gdb_rle(payload):
    """Runs of 4 or more equal bytes as QEMU 7.2's gdbstub sends them: c, `*`, chr(29 + n) for
    n more copies, n at most 97 and never 6 or 7 (which would give `#` or `$`)."""
    out, i = bytearray(), 0
    while i < len(payload):
        c, n = payload[i], 1
        while i + n < len(payload) and payload[i + n] == c and n < 98:
            n += 1
        out.append(c)
        more = n - 1
        if more in (6, 7):
            more = 5
        if more >= 3:
            out += b"*" + bytes([29 + more])
            i += 1 + more
        else:
            i += 1
    return bytes(out)


def gdb_raw_frame(body):
    return b"$" + body + b"#%02x" % (sum(body) % 256)


def gdb_mode(no_ack, split):
    """Byte 0 of a gdb_packet input: bit 0 no-ack, bits 1-7 the split point (0..127)."""
    return bytes([(split << 1) | int(no_ack)])


# QEMU 7.2's answers to a handshake (tests/gdb/test_gdb_parser.c's payloads).
GDB_HANDSHAKE = [
    b"PacketSize=1000;qXfer:features:read+;multiprocess+;QStartNoAckMode+",
    b"OK",
    b"T05thread:p01.01;",
    b"mp01.01,p01.02",
    b"l",
]

# The target.xml QEMU 7.2's gdbstub builds for x86_64 (gdbstub.c, get_feature_xml).
QEMU_TARGET_XML = (b'<?xml version="1.0"?><!DOCTYPE target SYSTEM "gdb-target.dtd"><target>'
                   b"<architecture>i386:x86-64</architecture>"
                   b'<xi:include href="i386-64bit.xml"/></target>')


def qemu_builtin_xml(name_marker):
    """The first XML document built into qemu-system-x86_64 that holds name_marker, or None."""
    qemu = shutil.which("qemu-system-x86_64")
    if not qemu:
        return None
    blob = read(qemu)
    start = blob.find(b'<?xml version="1.0"?>\n')
    while start >= 0:
        doc = blob[start:blob.index(b"\0", start)]
        if name_marker in doc:
            return doc
        start = blob.find(b'<?xml version="1.0"?>\n', start + 1)
    return None


def c_string(source, name):
    """The value of `static const char name[] = "..." "...";` in C source (escapes: \\" only)."""
    start = source.index("char %s[] =" % name)
    literals = source[start:source.index(";", start)]
    return "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', literals)).replace('\\"', '"').encode()


def gdb_seeds():
    hs = b"+" + b"+".join(gdb_frame(p) for p in GDB_HANDSHAKE) + b"+"
    seed("gdb_packet", "handshake", gdb_mode(False, 40) + hs)
    seed("gdb_packet", "handshake-no-ack", gdb_mode(True, 64) + hs.replace(b"+", b""))
    seed("gdb_packet", "stop-reply", gdb_mode(False, 5) + b"+" + gdb_frame(b"T05thread:01;"))
    seed("gdb_packet", "acks-and-interrupt", gdb_mode(False, 60) + b"+-+\x03+" + gdb_frame(b"OK"))
    seed("gdb_packet", "rle-short", gdb_mode(True, 2) + gdb_raw_frame(b'0*"'))
    g = b"00" * 200 + b"efbeadde00000000" + b"x" * 32 + b"ff" * 100
    seed("gdb_packet", "rle-g-reply", gdb_mode(False, 90) + gdb_raw_frame(gdb_rle(g)) + b"+")
    seed("gdb_packet", "notification", gdb_mode(False, 30) +
         b"%" + gdb_frame(b"Stop:T05thread:p01.02;")[1:] + gdb_frame(b"OK"))
    seed("gdb_packet", "escapes", gdb_mode(True, 50) + gdb_frame(b"a}b#c$d*e\0f"))
    seed("gdb_packet", "bad-checksum-ack", gdb_mode(False, 64) +
         b"$OK#00" + gdb_frame(b"E14") + b"%Stop:T05#00")
    seed("gdb_packet", "bad-checksum-no-ack", gdb_mode(True, 64) + b"$OK#00" + gdb_frame(b"OK"))
    seed("gdb_packet", "restarted-packet", gdb_mode(False, 10) + b"$T0" + gdb_frame(b"S05"))
    seed("gdb_packet", "bad-rle", gdb_mode(True, 100) + gdb_raw_frame(b"*!") +
         gdb_raw_frame(b"0*\x1f"))
    # A payload of exactly GDB_MAX_PACKET bytes, and one byte more (refused): '0', then `*` with
    # count byte 0xff (226 more) as often as fits, then the rest.
    def big(n):
        body = bytearray(b"0")
        left = n - 1
        while left >= 226:
            body += b"*\xff"
            left -= 226
        body += b"0" * left
        return gdb_raw_frame(bytes(body))
    seed("gdb_packet", "max-packet", gdb_mode(False, 127) + big(1 << 20) + gdb_frame(b"OK"))
    seed("gdb_packet", "over-max-packet", gdb_mode(True, 1) + big((1 << 20) + 1))

    fake = read(os.path.join(ROOT, "tests/gdb/test_gdb_fake.c")).decode()
    seed("gdb_tdesc", "fake-stub", c_string(fake, "target_xml") + b"\0" + c_string(fake, "regs_xml"))
    seed("gdb_tdesc", "self-include", b'<target><xi:include href="target.xml"/></target>\0')
    seed("gdb_tdesc", "missing-include", b'<target><xi:include href="missing.xml"/></target>\0')
    seed("gdb_tdesc", "unit-test",
         b'<?xml version="1.0"?><!DOCTYPE target SYSTEM "gdb-target.dtd"><target>'
         b'<feature name="a"><reg name="rax" bitsize="64" type="int64"/>'
         b'<!-- <reg name="ss_base" bitsize="64"/> --><reg name="eflags" bitsize="32"/>'
         b'<reg name="xmm0" bitsize="128" regnum="5"/><reg name="mxcsr" bitsize="32"/>'
         b"</feature></target>")
    regs = qemu_builtin_xml(b"<!-- x86_64 64bit -->")
    if regs is None:
        print("no i386-64bit.xml in qemu-system-x86_64: gdb_tdesc's QEMU seeds skipped")
        return
    seed("gdb_tdesc", "qemu-7.2-x86_64", QEMU_TARGET_XML + b"\0" + regs)
    seed("gdb_tdesc", "qemu-7.2-x86_64-flat", regs)


def symbol_seeds(build):
    for name in ("kernel.map", "kallsyms.txt", "kallsyms_hidden.txt"):
        seed("symmap", name, read(os.path.join(ROOT, "tests/symbols/data", name)))
    fixtures = os.path.join(build, "tests/symbols/fixtures")
    for name in ("fx.map", "fx", "fxcpp"):
        path = os.path.join(fixtures, name)
        if os.path.exists(path):
            seed("symmap" if name.endswith(".map") else "elf_symbols", name, read(path))
        else:
            print("no %s: skipped" % path)


def pagewalk_seeds():
    def walk(cr3, vaddr, *entries):
        return struct.pack("<QQ", cr3, vaddr) + b"".join(struct.pack("<Q", e) for e in entries)

    # Each table is the page at 0: entry 0 leads back to it, so every level reads one entry.
    seed("pagewalk", "4k", walk(0, 0x123, 0x3))
    seed("pagewalk", "1g", walk(0, 0x12345678, 0x83))
    seed("pagewalk", "2m", walk(0, (1 << 21) | 0x456, 0x3, 0x200083))
    seed("pagewalk", "not-present", walk(0, 0x1000, 0x3, 0x2))
    seed("pagewalk", "kernel-half", walk(0x8000000000000000, 0xffffffff80100000, 0x3))


def pagewalk_aarch64_seeds():
    def tcr(t0sz, tg0, t1sz, tg1, extra=0):
        return t0sz | tg0 << 14 | t1sz << 16 | tg1 << 30 | extra

    def walk(ttbr0, ttbr1, control, vaddr, entries):
        """entries: {physical address: descriptor}; memory from 0 up to the last one."""
        mem = bytearray(max(entries) + 8 if entries else 0)
        for addr, desc in entries.items():
            mem[addr:addr + 8] = struct.pack("<Q", desc)
        return struct.pack("<QQQQ", ttbr0, ttbr1, control, vaddr) + bytes(mem)

    t4 = tcr(16, 0, 25, 2)
    # Entry 0 of the table at 0 leads back to it: every level reads it, the last as a page.
    seed("pagewalk_aarch64", "4k-loop", walk(0, 0, t4, 0x123, {0: 0x3}))
    seed("pagewalk_aarch64", "4k-1g-block",
         walk(0, 0, t4, 0x12345678, {0: 0x1003, 0x1000: 0x40000701}))
    seed("pagewalk_aarch64", "4k-high-39",
         walk(0, 0x2000, t4, 0xffffff8040001234, {0x2008: 0x3003, 0x3000: 0x4003, 0x4008: 0x5000743}))
    seed("pagewalk_aarch64", "16k-32m-block", walk(0, 0, tcr(16, 2, 16, 1), 0x2345678,
                                                   {0: 0x3, 0x8: 0x2000001}))
    seed("pagewalk_aarch64", "64k-high",
         walk(0, 0, tcr(16, 1, 16, 3), 0xffff000000011234, {0: 0x3, 0x8: 0x3}))
    seed("pagewalk_aarch64", "reserved-tg0", walk(0, 0, tcr(16, 3, 25, 2), 0x1000, {0: 0x3}))
    seed("pagewalk_aarch64", "tbi0-tag", walk(0, 0, t4 | 1 << 37, 0x5a00000000000123, {0: 0x3}))


def unwind_seeds(build):
    regs = b"".join(struct.pack("<Q", v) for v in range(16))
    seed("unwind_stack", "synthetic", struct.pack("<BBHI", 0x02, 0, 0, 0x40) + regs +
         struct.pack("<QQ", 0, 0x7ffffff00000) + b"".join(
             struct.pack("<Q", 0x401200 + 8 * i) for i in range(32)))
    if subprocess.call(["cmake", "--build", build, "--target", "gen_unwind_seeds"]) == 0:
        out = os.path.join(HERE, "corpus", "unwind_stack")
        subprocess.check_call([os.path.join(build, "tests/fuzz/gen_unwind_seeds"), out])


MEM_BASE = 0x7F0000000000  # fuzz_mem_elf.c's


def loaded_image(path, relocate_dynamic=False):
    """The ELF at path as mmap maps it at MEM_BASE (PT_LOADs at their page offsets, bss zero);
    relocate_dynamic rewrites .dynamic's d_ptr entries to run-time addresses, as glibc's loader
    does."""
    data = read(path)
    phoff, = struct.unpack_from("<Q", data, 32)
    phnum, = struct.unpack_from("<H", data, 56)
    loads, dynamic = [], None
    for i in range(phnum):
        p_type, _, off, vaddr, _, filesz, memsz, _ = struct.unpack_from("<IIQQQQQQ", data, phoff + 56 * i)
        if p_type == 1:
            loads.append((off, vaddr, filesz, memsz))
        elif p_type == 2:
            dynamic = (vaddr, filesz)
    base = loads[0][1] & ~0xFFF
    mem = bytearray(max(v + m for _, v, _, m in loads) - base)
    for off, vaddr, filesz, _ in loads:
        mem[vaddr - base:vaddr - base + filesz] = data[off:off + filesz]
    if relocate_dynamic and dynamic:
        bias = MEM_BASE - base
        for at in range(dynamic[0] - base, dynamic[0] - base + dynamic[1], 16):
            tag, val = struct.unpack_from("<qQ", mem, at)
            if tag in (4, 5, 6, 0x6FFFFEF5):  # DT_HASH, DT_STRTAB, DT_SYMTAB, DT_GNU_HASH
                struct.pack_into("<Q", mem, at + 8, val + bias)
    return bytes(mem)


def mem_elf_seeds(build):
    path = os.path.join(build, "tests/symbols/fixtures/fxlib.so")
    if not os.path.exists(path):
        print("no %s: skipped" % path)
        return
    image = loaded_image(path)
    seed("mem_elf", "fxlib", b"\0" + image)
    seed("mem_elf", "fxlib-relocated", b"\0" + loaded_image(path, relocate_dynamic=True))
    seed("mem_elf", "fxlib-budget", b"\x03" + image)
    seed("mem_elf", "fxlib-cut", b"\0" + image[:0x2000])  # .eh_frame's page not present


def memimg_file(eh_len=136 << 10):
    """A file linked at 0 that one PT_LOAD maps whole, as tests/profiler/test_memimage.c makes
    it: .eh_frame_hdr at 0x1000, .dynamic at 0x1100 (DT_HASH: 3 symbols), .eh_frame of eh_len
    bytes of 256-byte entries at 0x4000 and its terminator."""
    eh_at, size = 0x4000, 0x4000 + eh_len + 4 + 0x1000
    b = bytearray(size)
    b[0:16] = b"\x7fELF\x02\x01\x01" + bytes(9)
    struct.pack_into("<HHIQQQIHHHHHH", b, 16, 3, 62, 1, 0, 64, 0, 0, 64, 56, 3, 64, 0, 0)
    phdr = "<IIQQQQQQ"
    struct.pack_into(phdr, b, 64, 1, 5, 0, 0, 0, size, size, 0x1000)  # PT_LOAD
    struct.pack_into(phdr, b, 120, 0x6474E550, 4, 0x1000, 0x1000, 0x1000, 8, 8, 4)  # EH_FRAME
    struct.pack_into(phdr, b, 176, 2, 6, 0x1100, 0x1100, 0x1100, 96, 96, 8)  # PT_DYNAMIC
    struct.pack_into("<BBBBi", b, 0x1000, 1, 0x1B, 0xFF, 0xFF, eh_at - 0x1004)
    dyn = [(6, 0x1300), (5, 0x1400), (10, 10), (11, 24), (4, 0x1200), (0, 0)]
    for i, (tag, val) in enumerate(dyn):
        struct.pack_into("<qQ", b, 0x1100 + 16 * i, tag, val)
    struct.pack_into("<II", b, 0x1200, 1, 3)
    struct.pack_into("<IBBHQQ", b, 0x1318, 1, 0x12, 0, 1, 0x2000, 0x10)
    struct.pack_into("<IBBHQQ", b, 0x1330, 5, 0x12, 0, 1, 0x2010, 0x10)
    b[0x1400:0x140A] = b"\0hot\0cold"
    for at in range(0, eh_len, 256):
        struct.pack_into("<I", b, eh_at + at, 252)
        b[eh_at + at + 4:eh_at + at + 256] = bytes([1 + at // 256 % 251]) * 252
    return bytes(b)


def memimg_head(mem_holes=0, cache_holes=0, budget=0, flags=0, seed=0):
    return struct.pack("<QQHBxxxxxQ", mem_holes, cache_holes, budget, flags, seed)


def memimg_seeds(build):
    small = memimg_file(12 << 10)  # no page cache: a missing page ends the copy
    seed("memimg", "small-no-cache", memimg_head(mem_holes=1 << 6, flags=1) + small)
    big = memimg_file()  # past .eh_frame's second 64 KiB round
    # The process's pages from the second .eh_frame round's sixth page on are missing (issue 44)
    holes = sum(1 << p for p in range(0x4000 // 4096 + 21, 64))
    seed("memimg", "small", memimg_head() + small)
    seed("memimg", "small-budget-cuts", memimg_head(budget=12, seed=0x9E3779B97F4A7C15) + small)
    seed("memimg", "cache-after-partial-round", memimg_head(mem_holes=holes) + big)
    seed("memimg", "cache-holes-overclaims",
         memimg_head(mem_holes=holes, cache_holes=1 << 30, flags=2, budget=100) + big)
    path = os.path.join(build, "tests/symbols/fixtures/fxlib.so")
    if os.path.exists(path):
        seed("memimg", "fxlib", memimg_head() + loaded_image(path))
        seed("memimg", "fxlib-relocated", memimg_head() + loaded_image(path, relocate_dynamic=True))
        seed("memimg", "fxlib-holes", memimg_head(mem_holes=0b110, seed=7) + loaded_image(path))


GENERATED = ("eh_frame", "qmp_parser", "registers", "symmap", "elf_symbols", "pagewalk",
             "pagewalk_aarch64", "unwind_stack", "gdb_packet", "gdb_tdesc", "mem_elf", "memimg")


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: make_seeds.py BUILD_DIR [TARGET...]")
    build = os.path.abspath(sys.argv[1])
    # Each generator with the corpora it writes; TARGET arguments pick generators by those.
    generators = [
        (("eh_frame",), lambda: eh_frame_seeds(build)),
        (("qmp_parser", "registers"), qmp_seeds),
        (("symmap", "elf_symbols"), lambda: symbol_seeds(build)),
        (("pagewalk",), pagewalk_seeds),
        (("pagewalk_aarch64",), pagewalk_aarch64_seeds),
        (("unwind_stack",), lambda: unwind_seeds(build)),
        (("gdb_packet", "gdb_tdesc"), gdb_seeds),
        (("mem_elf",), lambda: mem_elf_seeds(build)),
        (("memimg",), lambda: memimg_seeds(build)),
    ]
    wanted = set(sys.argv[2:]) or set(GENERATED)
    for targets, generate in generators:
        if not wanted & set(targets):
            continue
        # Only the corpora made here are rewritten; other targets keep theirs (guest_abi).
        for target in targets:
            d = os.path.join(HERE, "corpus", target)
            if os.path.isdir(d):
                shutil.rmtree(d)
        generate()

if __name__ == "__main__":
    main()
