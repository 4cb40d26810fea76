/**
 * A seccomp filter for sandboxed commands, as classic BPF for bubblewrap's `--seccomp FD`. Mounts and
 * namespaces cannot reach two things a command inherits: the caller's session keyring (where a
 * desktop keeps Kerberos, AFS and ecryptfs keys; `keyctl` reads and changes it from any namespace)
 * and ioctls that type into a terminal (TIOCSTI, TIOCLINUX). Those system calls fail with EPERM,
 * and so does every call made through another architecture's entry (i386's `int 0x80`, x32), which
 * the numbers below do not cover. Everything else is allowed: the namespaces are the boundary.
 */

interface Arch {
  /** AUDIT_ARCH_* of seccomp_data.arch. */
  audit: number;
  keyctl: number;
  addKey: number;
  requestKey: number;
  ioctl: number;
}

const ARCHES: Partial<Record<NodeJS.Architecture, Arch>> = {
  x64: { audit: 0xc000003e, keyctl: 250, addKey: 248, requestKey: 249, ioctl: 16 },
  arm64: { audit: 0xc00000b7, keyctl: 219, addKey: 217, requestKey: 218, ioctl: 29 },
};

const TIOCSTI = 0x5412;
const TIOCLINUX = 0x541c;
/** x32 system calls carry this bit (x86-64 only; no arm64 call number reaches it). */
const X32_SYSCALL_BIT = 0x40000000;

const BPF_LD_W_ABS = 0x20;
const BPF_JEQ_K = 0x15;
const BPF_JGE_K = 0x35;
const BPF_RET_K = 0x06;
const SECCOMP_RET_ALLOW = 0x7fff0000;
const SECCOMP_RET_ERRNO_EPERM = 0x00050000 | 1;
/** Offsets in struct seccomp_data: nr, arch, then args[] after the instruction pointer. */
const NR = 0;
const ARCH = 4;
const ARG1_LOW = 16 + 8; // little-endian: the low 32 bits of args[1]

type Step =
  | { load: number }
  | { jump: "eq" | "ge"; value: number; ifTrue: string; ifFalse: string }
  | { label: string; ret: number };

/** The filter for this machine's architecture; undefined where it has none (commands then run without one). */
export function seccompFilter(arch: NodeJS.Architecture = process.arch): Buffer | undefined {
  const a = ARCHES[arch];
  if (!a) return undefined;
  const next = "next";
  const steps: Step[] = [
    { load: ARCH },
    { jump: "eq", value: a.audit, ifTrue: next, ifFalse: "deny" },
    { load: NR },
    { jump: "ge", value: X32_SYSCALL_BIT, ifTrue: "deny", ifFalse: next },
    { jump: "eq", value: a.keyctl, ifTrue: "deny", ifFalse: next },
    { jump: "eq", value: a.addKey, ifTrue: "deny", ifFalse: next },
    { jump: "eq", value: a.requestKey, ifTrue: "deny", ifFalse: next },
    { jump: "eq", value: a.ioctl, ifTrue: next, ifFalse: "allow" },
    { load: ARG1_LOW },
    { jump: "eq", value: TIOCSTI, ifTrue: "deny", ifFalse: next },
    { jump: "eq", value: TIOCLINUX, ifTrue: "deny", ifFalse: "allow" },
    { label: "allow", ret: SECCOMP_RET_ALLOW },
    { label: "deny", ret: SECCOMP_RET_ERRNO_EPERM },
  ];
  return assemble(steps);
}

/** Classic BPF: 8 bytes an instruction (u16 code, u8 jt, u8 jf, u32 k), jumps relative to the next one. */
function assemble(steps: Step[]): Buffer {
  const at = new Map<string, number>();
  steps.forEach((step, i) => {
    if ("label" in step) at.set(step.label, i);
  });
  const offset = (from: number, target: string) =>
    target === "next" ? 0 : (at.get(target) as number) - from - 1;
  const out = Buffer.alloc(steps.length * 8);
  steps.forEach((step, i) => {
    const o = i * 8;
    if ("load" in step) {
      out.writeUInt16LE(BPF_LD_W_ABS, o);
      out.writeUInt32LE(step.load, o + 4);
    } else if ("jump" in step) {
      out.writeUInt16LE(step.jump === "eq" ? BPF_JEQ_K : BPF_JGE_K, o);
      out.writeUInt8(offset(i, step.ifTrue), o + 2);
      out.writeUInt8(offset(i, step.ifFalse), o + 3);
      out.writeUInt32LE(step.value >>> 0, o + 4);
    } else {
      out.writeUInt16LE(BPF_RET_K, o);
      out.writeUInt32LE(step.ret >>> 0, o + 4);
    }
  });
  return out;
}
