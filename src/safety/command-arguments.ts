/**
 * The options and operands that make a command known to read do more: banned options (with the
 * abbreviations getopt accepts), operands that write or set the system, and git's read-only forms.
 */

import {
  type CommandOptions,
  FIND_NEVER,
  GIT_GREP_OPTIONS,
  GIT_LISTING,
  GIT_NEVER,
  GIT_READ,
  GIT_REMOTE_READ,
  GIT_REMOTE_VERBOSE,
  type GitListing,
  OPTION_RULES,
} from "./command-lists.js";

/** The options or operands that make a read-only command run a program, write, or change the system. */
export function argumentProblem(name: string, words: string[]): string | undefined {
  if (name === "find" && words.some((a) => FIND_NEVER.test(a)))
    return "find with -exec, -delete, -fprint or -files0-from";
  if (name === "git") return gitProblem(words);
  const rules = OPTION_RULES.get(name);
  if (!rules) return undefined;
  return bannedOption(words, rules) ?? operandProblem(name, operandsOf(words, rules));
}

/** uniq writes its second operand; date and hostname set the clock and the host name from theirs. */
function operandProblem(name: string, operands: string[]): string | undefined {
  if (name === "uniq" && operands.length > 1) return `uniq writes its second operand (${operands[1]})`;
  if (name === "date" && operands.some((o) => !o.startsWith("+")))
    return "date with an operand other than +FORMAT sets the system clock";
  if (name === "hostname" && operands.length > 0) return "hostname with an operand sets the host name";
  return undefined;
}

function gitProblem(words: string[]): string | undefined {
  if (words.some((a) => GIT_NEVER.some((flag) => a === flag || a.startsWith(`${flag}=`))))
    return "git with -c, -p, --output, --ext-diff or --textconv";
  const at = words.findIndex((a) => !a.startsWith("-"));
  const sub = words[at];
  if (sub === undefined || !GIT_READ.has(sub)) return `git ${sub ?? ""} is not known to be read-only`.trim();
  const rest = words.slice(at + 1);
  if (sub === "grep") return bannedOption(rest, GIT_GREP_OPTIONS);
  if (sub === "branch" || sub === "tag") return gitListingProblem(sub, rest, GIT_LISTING[sub]);
  if (sub === "remote") return gitRemoteProblem(rest);
  return undefined;
}

/** `git branch` and `git tag` are known to read only in a listing form; a name operand creates one. */
function gitListingProblem(sub: string, words: string[], listing: GitListing): string | undefined {
  const operands: string[] = [];
  let patterns = false;
  for (let i = 0; i < words.length; i++) {
    const word = words[i] as string;
    const option = word.split("=")[0] as string;
    if (word === "--") {
      operands.push(...words.slice(i + 1));
      break;
    }
    if (!word.startsWith("-")) operands.push(word);
    else if (listing.valued.includes(option)) {
      if (!word.includes("=")) i++;
    } else if (listing.flags.includes(option)) patterns ||= option === "--list";
    else if (isLetterBundle(word, listing.letters)) patterns ||= word.includes("l");
    else return `git ${sub} ${word} is not a listing form, the only one known to be read-only`;
  }
  // With -l/--list the operands are patterns to list; otherwise the first names a new branch or tag.
  if (operands.length > 0 && !patterns) return `git ${sub} ${operands[0]} creates or changes a ${sub}`;
  return undefined;
}

/** `-av`, `-vv`, `-n3`: short options all among `letters`, with a count after them. */
function isLetterBundle(word: string, letters: string): boolean {
  const bundle = /^-([A-Za-z]+)\d*$/.exec(word)?.[1];
  return bundle !== undefined && [...bundle].every((letter) => letters.includes(letter));
}

/** `git remote` lists alone or with -v; of its actions only `show` and `get-url` read. */
function gitRemoteProblem(words: string[]): string | undefined {
  const [action, ...rest] = words.filter((w) => !GIT_REMOTE_VERBOSE.includes(w));
  if (action === undefined) return undefined;
  const options = GIT_REMOTE_READ.get(action);
  if (!options) return `git remote ${action} is not known to be read-only`;
  const other = rest.find((w) => w.startsWith("-") && !options.includes(w));
  return other === undefined ? undefined : `git remote ${action} ${other} is not known to be read-only`;
}

/** The first banned option among the words, as the reason it is banned. */
function bannedOption(words: string[], rules: CommandOptions): string | undefined {
  for (const ban of rules.banned) {
    const word = words.find(
      (w) =>
        (ban.short !== undefined && shortFlags(w, rules).includes(ban.short)) ||
        (ban.long !== undefined && abbreviates(w, ban.long)),
    );
    if (word !== undefined) return `${ban.why} (${word})`;
  }
  return undefined;
}

/**
 * The letters of a short-option word (`-uo` → u, o), up to the first that takes a value: the rest of
 * the word is that value (`-o/tmp/x`), not more options.
 */
function shortFlags(word: string, rules: CommandOptions): string[] {
  if (!/^-[^-]/.test(word)) return [];
  const flags: string[] = [];
  for (const letter of word.slice(1)) {
    flags.push(letter);
    if (rules.valued.includes(letter) || rules.attached?.includes(letter)) break;
  }
  return flags;
}

/**
 * Whether a word is the long option or an abbreviation of it (`--outp=x` for `--output`): GNU getopt
 * and git's parse-options take any unambiguous prefix. Every prefix counts here, even an ambiguous one
 * (the command then refuses to run), so a short prefix such as `--o` is caught too.
 */
function abbreviates(word: string, option: string): boolean {
  if (!word.startsWith("--")) return false;
  const name = word.slice(2).split("=")[0] ?? "";
  return name.length > 0 && option.slice(2).startsWith(name);
}

/** The operands of a getopt-style command line: neither options nor the values they take. */
function operandsOf(words: string[], rules: CommandOptions): string[] {
  const operands: string[] = [];
  for (let i = 0; i < words.length; i++) {
    const word = words[i] as string;
    if (word === "--") return [...operands, ...words.slice(i + 1)];
    if (word === "-" || !word.startsWith("-")) operands.push(word);
    else if (takesNextWord(word, rules)) i++;
  }
  return operands;
}

/** `-f 1`, `-cf 1` and `--skip-fields 1` take the next word as their value; `-f1` and `--skip-fields=1` do not. */
function takesNextWord(word: string, rules: CommandOptions): boolean {
  if (word.startsWith("--"))
    return !word.includes("=") && (rules.valuedLong ?? []).some((option) => abbreviates(word, option));
  const flags = shortFlags(word, rules);
  const last = flags.at(-1);
  return last !== undefined && rules.valued.includes(last) && flags.length === word.length - 1;
}
