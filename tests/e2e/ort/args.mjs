// What the ONNX Runtime scripts of this folder (greedy.mjs, search.mjs) share of their command
// lines: the usage error they exit 2 on, and the ids of a --prompt-ids.

export class UsageError extends Error {}

// "5,17,42" as [5, 17, 42]; anything but non-negative integers, or none, is a usage error.
export function promptIds(text) {
  const ids = text.split(',').filter((t) => t.trim() !== '').map((t) => {
    if (!/^\s*\d+\s*$/.test(t)) throw new UsageError(`--prompt-ids: not a token id: ${JSON.stringify(t)}`);
    return Number(t);
  });
  if (ids.length === 0) throw new UsageError('--prompt-ids: a prompt needs at least one id');
  return ids;
}

// Calls handle(flag, value) for each flag of argv; value() takes the argument after the flag.
export function eachFlag(argv, handle) {
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    handle(flag, () => {
      if (i + 1 >= argv.length) throw new UsageError(`${flag} needs a value`);
      return argv[++i];
    });
  }
}
