#!/usr/bin/env python3
"""Run one of the README's quick starts, as written, against the demo guest.

Usage: quickstart.py README SECTION QPROF KERNEL USER_DIR QEMU [PLUGIN]

SECTION is the heading of a quick start ("Your own OS", "The TCG plugin"); its first code block
is a QEMU command line and a qprof command line. They are run with only the README's
placeholders filled in (mykernel.elf, build/userland, build/qprof-plugin.so, the RAM file's
name, the QEMU binary: QEMU, or QEMU 10 from a private prefix with its -L and module folder),
the serial console to a file so that qprof starts once the guest says "ready", and
--samples 300 added to qprof's, so that the run takes a fixed number of samples. The folded
output must exist and hold the demo's hot_a in spin for a tenth of the samples or more. Exits 77
when QEMU or the plugin is missing.
"""
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time

SAMPLES = 300


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


def ready(paths, serial):
    if not all(os.path.exists(p) for p in paths):
        return False
    with open(serial, encoding="utf-8", errors="replace") as f:
        return "ready" in f.read()


def wait_for(paths, serial, qemu, deadline_s):
    """Until the sockets are there and the guest said it runs its programs (a boot under load
    takes long, and samples of the firmware would stand for nothing the README promises)."""
    end = time.monotonic() + deadline_s
    while not ready(paths, serial):
        if qemu.poll() is not None:
            sys.exit("QEMU exited (%d) before %s appeared" % (qemu.returncode, " and ".join(paths)))
        if time.monotonic() > end:
            sys.exit("%s and 'ready' on the serial console not there within %d s"
                     % (" and ".join(paths), deadline_s))
        time.sleep(0.05)


def hot_a_share(folded):
    total = hot_a = 0
    with open(folded, encoding="utf-8") as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            total += int(count)
            frames = stack.split(";")
            if frames[0].startswith("spin") and frames[-1] == "hot_a":
                hot_a += int(count)
    return hot_a, total


def main():
    readme, section, qprof_bin, kernel, user_dir, qemu_bin = sys.argv[1:7]
    plugin = os.path.abspath(sys.argv[7]) if len(sys.argv) > 7 else None
    # the commands run in a scratch folder of their own
    qprof_bin, kernel, user_dir = (os.path.abspath(p) for p in (qprof_bin, kernel, user_dir))
    if os.sep in qemu_bin:
        qemu_bin = os.path.abspath(qemu_bin)
    if not os.access(qemu_bin, os.X_OK) and not any(
            os.access(os.path.join(d, qemu_bin), os.X_OK) for d in os.environ["PATH"].split(":")):
        print("SKIP: no %s" % qemu_bin)
        return 77
    if plugin is not None and not os.path.isfile(plugin):
        print("SKIP: no qprof-plugin.so (no QEMU 9.2 or later and its plugin header)")
        return 77
    qemu_argv, qprof_argv = quick_start(readme, section)
    work = tempfile.mkdtemp(prefix="qprof-quickstart-")
    ram = "/dev/shm/qprof-quickstart-%d" % os.getpid()
    places = {"mykernel.elf": kernel, "build/userland": user_dir, "/dev/shm/myos-ram": ram}
    if plugin:
        places["build/qprof-plugin.so"] = plugin
    qemu_argv = fill(qemu_argv, places)
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
    qprof_argv = [qprof_bin] + fill(qprof_argv[1:], places) + ["--samples", str(SAMPLES)]
    print("$ " + " ".join(shlex.quote(w) for w in qemu_argv), flush=True)
    qemu = subprocess.Popen(qemu_argv, cwd=work, env=env, stdin=subprocess.DEVNULL)
    try:
        sockets = [os.path.join(work, "qmp-socket")]
        if plugin:
            sockets.append(os.path.join(work, "qprof-plugin"))
        wait_for(sockets, serial, qemu, 120)
        print("$ " + " ".join(shlex.quote(w) for w in qprof_argv), flush=True)
        rc = subprocess.run(qprof_argv, cwd=work, timeout=300).returncode
        if rc != 0:
            print("FAIL: qprof exited %d" % rc)
            return 1
        outputs = [w for w in qprof_argv if w.endswith(".folded")]
        hot_a, total = hot_a_share(os.path.join(work, outputs[0]))
        print("%s: %d samples, spin's hot_a %d" % (outputs[0], total, hot_a))
        if total < SAMPLES or hot_a * 10 < SAMPLES:
            print("FAIL: want %d samples or more, hot_a a tenth of them or more" % SAMPLES)
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
