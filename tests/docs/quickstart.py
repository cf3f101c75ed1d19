#!/usr/bin/env python3
"""Run one of the README's quick starts, as written, against a test guest.

Usage: quickstart.py README SECTION QPROF QEMU [--place TEXT=VALUE]... [--plugin SO]
                     [--append ARG] [--ready TEXT] [--expect ROOT;FRAME] [--samples N]

SECTION is the heading of a quick start ("Your own OS", "The TCG plugin", "A Linux VM with
nothing installed"); its first code block is a QEMU command line and a qprof command line. They
are run with only the README's placeholders filled in (--place: mykernel.elf, vmlinuz, the RAM
file's name...; the QEMU binary: QEMU, or QEMU 10 from a private prefix with its -L and module
folder; --plugin: build/qprof-plugin.so), ARG added to the kernel's -append (the Linux guest's
workload), the serial console sent to a file so that qprof starts once the guest printed TEXT
(default "ready"), and --samples N (300) added to qprof's, so that the run takes a fixed number
of samples. The folded output must exist and hold ROOT...;FRAME stacks (a root starting with ROOT,
a leaf named FRAME; default spin;hot_a) for a tenth of the samples or more. Exits 77 when QEMU,
the plugin or a placed file is missing.
"""
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time

def quick_start(readme, section):
    """The QEMU and qprof command lines of SECTION's first code block, continuations joined."""
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^#+ %s\b.*?^```\n(.*?)^```" % re.escape(section), text, re.S | re.M)
    if not m:
        sys.exit("no quick start '%s' with a code block in %s" % (section, readme))
    lines = m.group(1).replace("\\\n", " ").splitlines()
    qemu = [shlex.split(l) for l in lines if l.startswith("qemu-system-")]
    qprof = [shlex.split(l) for l in lines if l.startswith("qprof ")]
    if len(qemu) != 1 or len(qprof) != 1:
        sys.exit("'%s': want one qemu-system line and one qprof line, got %d and %d"
                 % (section, len(qemu), len(qprof)))
    return qemu[0], qprof[0]


def fill(argv, places):
    out = []
    for word in argv:
        for old, new in places.items():
            word = word.replace(old, new)
        out.append(word)
    return out


def ready(paths, serial, text):
    if not all(os.path.exists(p) for p in paths):
        return False
    with open(serial, encoding="utf-8", errors="replace") as f:
        return text in f.read()


def wait_for(paths, serial, text, qemu, deadline_s):
    """Until the sockets are there and the guest said it runs its programs (a boot under load
    takes long, and samples of the firmware would stand for nothing the README promises)."""
    end = time.monotonic() + deadline_s
    while not ready(paths, serial, text):
        if qemu.poll() is not None:
            sys.exit("QEMU exited (%d) before %s appeared" % (qemu.returncode, " and ".join(paths)))
        if time.monotonic() > end:
            sys.exit("%s and '%s' on the serial console not there within %d s"
                     % (" and ".join(paths), text, deadline_s))
        time.sleep(0.05)


def share(folded, root, leaf):
    total = hits = 0
    with open(folded, encoding="utf-8") as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            total += int(count)
            frames = stack.split(";")
            if frames[0].startswith(root) and frames[-1] == leaf:
                hits += int(count)
    return hits, total


def options(argv):
    opts = {"place": {}, "plugin": None, "append": None, "ready": "ready",
            "expect": "spin;hot_a", "samples": "300"}
    while argv:
        flag, value = argv[0], argv[1]
        argv = argv[2:]
        if flag == "--place":
            old, _, new = value.partition("=")
            opts["place"][old] = os.path.abspath(new)
        elif flag in ("--plugin", "--append", "--ready", "--expect", "--samples"):
            opts[flag[2:]] = value
        else:
            sys.exit("quickstart.py: unknown option %s" % flag)
    return opts


def main():
    readme, section, qprof_bin, qemu_bin = sys.argv[1:5]
    opts = options(sys.argv[5:])
    plugin = os.path.abspath(opts["plugin"]) if opts["plugin"] else None
    # the commands run in a scratch folder of their own
    qprof_bin = os.path.abspath(qprof_bin)
    if os.sep in qemu_bin:
        qemu_bin = os.path.abspath(qemu_bin)
    if not os.access(qemu_bin, os.X_OK) and not any(
            os.access(os.path.join(d, qemu_bin), os.X_OK) for d in os.environ["PATH"].split(":")):
        print("SKIP: no %s" % qemu_bin)
        return 77
    if plugin is not None and not os.path.isfile(plugin):
        print("SKIP: no qprof-plugin.so (no QEMU 9.2 or later and its plugin header)")
        return 77
    for path in opts["place"].values():
        if not os.path.exists(path):
            print("SKIP: no %s (its guest is not built)" % path)
            return 77
    qemu_argv, qprof_argv = quick_start(readme, section)
    work = tempfile.mkdtemp(prefix="qprof-quickstart-")
    ram = "/dev/shm/qprof-quickstart-%d" % os.getpid()
    places = dict(opts["place"])
    places["/dev/shm/myos-ram"] = ram
    places["/dev/shm/linux-ram"] = ram
    if plugin:
        places["build/qprof-plugin.so"] = plugin
    qemu_argv = fill(qemu_argv, places)
    if opts["append"]:
        i = qemu_argv.index("-append") + 1
        qemu_argv[i] += " " + opts["append"]
    env = dict(os.environ)
    if os.path.dirname(qemu_bin) and not qemu_bin.startswith("/usr/bin/"):
        # QEMU 10 unpacked in a private prefix: its own firmware and modules (docs/plugin.md)
        prefix = os.path.dirname(os.path.dirname(qemu_bin))
        qemu_argv[1:1] = ["-L", prefix + "/share/qemu", "-L", "/usr/share/seabios"]
        env["QEMU_MODULE_DIR"] = prefix + "/lib/x86_64-linux-gnu/qemu"
    qemu_argv[0] = qemu_bin
    serial = os.path.join(work, "serial.log")
    open(serial, "w").close()
    qemu_argv += ["-serial", "file:" + serial]
    samples = int(opts["samples"])
    qprof_argv = [qprof_bin] + fill(qprof_argv[1:], places) + ["--samples", str(samples)]
    root, _, leaf = opts["expect"].partition(";")
    print("$ " + " ".join(shlex.quote(w) for w in qemu_argv), flush=True)
    qemu = subprocess.Popen(qemu_argv, cwd=work, env=env, stdin=subprocess.DEVNULL)
    try:
        # the sockets the QEMU command opens (the plugin's quick start has no QMP)
        sockets = [os.path.join(work, name) for name in ("qmp-socket", "qprof-plugin")
                   if any(name in w for w in qemu_argv)]
        wait_for(sockets, serial, opts["ready"], qemu, 300)
        print("$ " + " ".join(shlex.quote(w) for w in qprof_argv), flush=True)
        rc = subprocess.run(qprof_argv, cwd=work, timeout=300).returncode
        if rc != 0:
            print("FAIL: qprof exited %d" % rc)
            return 1
        outputs = [w for w in qprof_argv if w.endswith(".folded")]
        hits, total = share(os.path.join(work, outputs[0]), root, leaf)
        print("%s: %d samples, %d of them %s...;%s" % (outputs[0], total, hits, root, leaf))
        if total < samples or hits * 10 < samples:
            print("FAIL: want %d samples or more, a tenth of them or more %s...;%s"
                  % (samples, root, leaf))
            return 1
        return 0
    finally:
        qemu.send_signal(signal.SIGTERM)
        try:
            qemu.wait(timeout=30)
        except subprocess.TimeoutExpired:
            qemu.kill()
            qemu.wait()
        if os.path.exists(ram):
            os.unlink(ram)
        subprocess.run(["rm", "-rf", work], check=False)


if __name__ == "__main__":
    sys.exit(main())
