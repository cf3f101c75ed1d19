#!/bin/sh
# vmlinux-btf.sh DEB OUT: extracts the kernel's .BTF section (the bytes the running kernel keeps
# between __start_BTF and __stop_BTF) from a Debian linux-image .deb, without installing it.
# Writes OUT (the raw BTF blob) and OUT.release (the kernel release, e.g. 6.1.0-56-amd64).
#
# The vmlinuz is an x86 bzImage. Its setup header (Documentation/arch/x86/boot.rst) gives
#   0x1f1 setup_sects (u8; 0 means 4): the protected-mode code starts at (setup_sects + 1) * 512
#   0x248 payload_offset (u32), relative to that start; 0x24c payload_length (u32)
# The payload is the compressed vmlinux ELF (here XZ; the build appends the decompressed size,
# hence --single-stream). Other compressions are refused with a message rather than guessed.
set -eu

if [ $# -ne 2 ]; then
    echo "usage: $0 LINUX-IMAGE.deb OUT.btf" >&2
    exit 2
fi
deb=$1
out=$2
for tool in dpkg-deb tar xz objcopy od dd; do
    command -v "$tool" >/dev/null 2>&1 || { echo "$0: $tool not found" >&2; exit 3; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/vmlinux-btf.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

# Only ./boot is needed; the modules are most of the archive.
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$work" --wildcards './boot/vmlinuz-*'
set -- "$work"/boot/vmlinuz-*
if [ $# -ne 1 ] || [ ! -f "$1" ]; then
    echo "$0: $deb holds no single boot/vmlinuz-*" >&2
    exit 1
fi
vmlinuz=$1
release=${vmlinuz##*/vmlinuz-}

# u32/u8 little-endian reads from the setup header.
u32() { od -An -t u4 -j "$1" -N 4 --endian=little "$vmlinuz" | tr -d ' '; }
u8() { od -An -t u1 -j "$1" -N 1 "$vmlinuz" | tr -d ' '; }

magic=$(dd if="$vmlinuz" bs=1 skip=514 count=4 2>/dev/null)
if [ "$magic" != "HdrS" ]; then
    echo "$0: $vmlinuz is not a bzImage (no HdrS at 0x202)" >&2
    exit 1
fi
setup_sects=$(u8 497) # 0x1f1
[ "$setup_sects" -eq 0 ] && setup_sects=4
payload_offset=$(u32 584) # 0x248
payload_length=$(u32 588) # 0x24c
start=$(((setup_sects + 1) * 512 + payload_offset))

dd if="$vmlinuz" of="$work/payload" bs=4096 iflag=skip_bytes,count_bytes skip="$start" \
    count="$payload_length" 2>/dev/null
xzmagic=$(od -An -t x1 -N 6 "$work/payload" | tr -d ' ')
if [ "$xzmagic" != "fd377a585a00" ]; then
    echo "$0: the bzImage payload is not XZ (starts with $xzmagic); only XZ is supported" >&2
    exit 1
fi
xz -dc --single-stream "$work/payload" >"$work/vmlinux"

elfmagic=$(od -An -t x1 -N 4 "$work/vmlinux" | tr -d ' ')
if [ "$elfmagic" != "7f454c46" ]; then
    echo "$0: the decompressed payload is not an ELF file" >&2
    exit 1
fi
objcopy -O binary --only-section=.BTF "$work/vmlinux" "$work/btf"
if [ ! -s "$work/btf" ]; then
    echo "$0: vmlinux of $release has no .BTF section (CONFIG_DEBUG_INFO_BTF off?)" >&2
    exit 1
fi
mv "$work/btf" "$out"
printf '%s\n' "$release" >"$out.release"
