/**
 * A seccomp filter for sandboxed commands, as classic BPF for bubblewrap's `--seccomp FD`. Mounts and
 * namespaces cannot reach two things a command inherits: the caller's session keyring (where a
 * desktop keeps Kerberos, AFS and ecryptfs keys; `keyctl` reads and changes it from any namespace)
 * and ioctls that type into a terminal (TIOCSTI, TIOCLINUX). Nor can they keep a command from
 * leaving a set-user-ID or set-group-ID program in the workspace: no_new_privs stops it inside,
 * but the bit stays on the file, and whoever runs it later outside (another local user too) runs
 * it as the user Troupe runs as. A chmod, a create or a mknod that asks for either bit fails. Those
 * system calls fail with EPERM, and so does every call made through another architecture's entry
 * (i386's `int 0x80`, x32), which the numbers below do not cover. Everything else is allowed: the
 * namespaces are the boundary.
 */

interface Arch {
  /** AUDIT_ARCH_* of seccomp_data.arch. */
  audit: number;
  keyctl: number;
  addKey: number;
  requestKey: number;
  ioctl: number;
  /** Calls that set a file's mode, by number: which argument holds the mode. */
  modes: Array<[call: number, arg: number]>;
}

const ARCHES: Partial<Record<NodeJS.Architecture, Arch>> = {
  x64: {
    audit: 0xc000003e,
    keyctl: 250,
    addKey: 248,
    requestKey: 249,
    ioctl: 16,
    // open, creat, chmod, fchmod, mknod, openat, mknodat, fchmodat, fchmodat2
    modes: [
      [2, 2],
      [85, 1],
      [90, 1],
      [91, 1],
      [133, 1],
      [257, 3],
      [259, 2],
      [268, 2],
      [452, 2],
    ],
  },
  arm64: {
    audit: 0xc00000b7,
    keyctl: 219,
    addKey: 217,
    requestKey: 218,
    ioctl: 29,
    // mknodat, fchmod, fchmodat, openat, fchmodat2
    modes: [
      [33, 2],
      [52, 1],
      [53, 2],
      [56, 3],
      [452, 2],
    ],
  },
};

/** S_ISUID | S_ISGID. */
const SET_ID_BITS = 0o6000;

const TIOCSTI = 0x5412;
const TIOCLINUX = 0x541c;
/** x32 system calls carry this bit (x86-64 only; no arm64 call number reaches it). */
const X32_SYSCALL_BIT = 0x40000000;

const BPF_LD_W_ABS = 0x20;
const BPF_JEQ_K = 0x15;
const BPF_JGE_K = 0x35;
const BPF_JSET_K = 0x45;
const BPF_RET_K = 0x06;
const SECCOMP_RET_ALLOW = 0x7fff0000;
const SECCOMP_RET_ERRNO_EPERM = 0x00050000 | 1;
/** Offsets in struct seccomp_data: nr, arch, then args[] after the instruction pointer. */
const NR = 0;
const ARCH = 4;
/** The low 32 bits of args[n] (little-endian). */
const argLow = (n: number) => 16 + 8 * n;
const ARG1_LOW = argLow(1);

/** One instruction; a `label` names it as a jump's target. */
type Step = (
  | { load: number }
  | { jump: "eq" | "ge" | "set"; value: number; ifTrue: string; ifFalse: string }
  | { ret: number }
) & { label?: string };

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
    ...a.modes.map(([call]): Step => ({ jump: "eq", value: call, ifTrue: `mode-${call}`, ifFalse: next })),
    { jump: "eq", value: a.ioctl, ifTrue: next, ifFalse: "allow" },
    { load: ARG1_LOW },
    { jump: "eq", value: TIOCSTI, ifTrue: "deny", ifFalse: next },
    { jump: "eq", value: TIOCLINUX, ifTrue: "deny", ifFalse: "allow" },
    // Each mode-setting call: its mode argument, denied when it asks for a set-ID bit.
    ...a.modes.flatMap(([call, arg]): Step[] => [
      { label: `mode-${call}`, load: argLow(arg) },
      { jump: "set", value: SET_ID_BITS, ifTrue: "deny", ifFalse: "allow" },
    ]),
    { label: "allow", ret: SECCOMP_RET_ALLOW },
    { label: "deny", ret: SECCOMP_RET_ERRNO_EPERM },
  ];
  return assemble(steps);
}

/** Classic BPF: 8 bytes an instruction (u16 code, u8 jt, u8 jf, u32 k), jumps relative to the next one. */
function assemble(steps: Step[]): Buffer {
  const at = new Map<string, number>();
  steps.forEach((step, i) => {
    if (step.label) at.set(step.label, i);
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
      out.writeUInt16LE(step.jump === "eq" ? BPF_JEQ_K : step.jump === "ge" ? BPF_JGE_K : BPF_JSET_K, o);
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
