/**
 * @module `kvgate explain --decisions FILE[,FILE.1,…]`: replays a decision log (written with --decision-log) through
 * the WASM core and reports the decisions that come out differently, then the summary. Exit 1 on any mismatch.
 */
import { createKvIndex } from "../core/create-kv-index.ts";
import { isKvgateError } from "../core/errors.ts";
import { parseDecisionLine, type LoggedDecision } from "../decisions/decision-log-format.ts";
import { DecisionReplayer } from "../decisions/decision-replay.ts";
import { renderSummary, SummaryBuilder } from "../decisions/explain-summary.ts";

export const EXPLAIN_USAGE = `usage: kvgate explain --decisions FILE[,FILE.1,...] [--json] [--show N]
  re-runs every logged routing decision through the WASM core and reports any that come out differently
  (chosen worker or cost; block hashes too when the log kept the tokens), then the overlap distribution, how
  often load overrode cache and each worker's share. Exit code 1 when a decision does not replay.
  --json     print the summary as JSON
  --show N   list at most N mismatches (default 50)`;

export interface ExplainIo {
  readText(path: string): string;
  write(text: string): void;
}

export async function runExplain(args: readonly string[], io: ExplainIo): Promise<number> {
  let files: string[] = [];
  let json = false, show = 50;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === "--help" || a === "-h") {
      io.write(EXPLAIN_USAGE + "\n");
      return 0;
    }
    if (a === "--json") json = true;
    else if (a === "--decisions" && args[i + 1] !== undefined) files = args[++i]!.split(",").filter((f) => f !== "");
    else if (a === "--show" && /^\d+$/.test(args[i + 1] ?? "")) show = Number(args[++i]);
    else {
      io.write(`kvgate explain: unexpected argument ${JSON.stringify(a)}\n${EXPLAIN_USAGE}\n`);
      return 2;
    }
  }
  if (files.length === 0) {
    io.write(`kvgate explain: --decisions FILE is required\n${EXPLAIN_USAGE}\n`);
    return 2;
  }
  const decisions: { d: LoggedDecision; where: string }[] = [];
  let widest = 1;
  try {
    for (const f of files) {
      const lines = io.readText(f).split("\n");
      for (let i = 0; i < lines.length; i++) {
        if (lines[i]!.trim() === "") continue;
        const d = parseDecisionLine(lines[i]!, `${f}:${i + 1}`);
        widest = Math.max(widest, d.candidates.length);
        decisions.push({ d, where: `${f}:${i + 1}` });
      }
    }
  } catch (e) {
    io.write(`kvgate explain: ${isKvgateError(e) ? e.message : String((e as Error)?.message ?? e)}\n`);
    return 2;
  }
  const longest = decisions.reduce((m, x) => Math.max(m, x.d.tokens?.length ?? 0), 16);
  const index = await createKvIndex({ capacity: 1024, maxSlots: Math.max(1, widest), maxPromptTokens: Math.max(1 << 17, longest) });
  const replayer = new DecisionReplayer(index);
  const summary = new SummaryBuilder(show);
  for (const { d, where } of decisions) summary.add(d, replayer.replay(d, where));
  const s = summary.done();
  io.write(json ? JSON.stringify({ files, ...s }, null, 2) + "\n" : renderSummary(s, files));
  return s.mismatched > 0 ? 1 : 0;
}
